"""The lowest layer: what every other layer uses (workers, phases, bounded waits, tag names); it
imports nothing of atlas_dagster above it."""
