"""The lowest layer: what every other layer uses (calendar days, tag names, bounded waits, phase
timings, workers); it imports nothing of atlas_dagster above it."""
