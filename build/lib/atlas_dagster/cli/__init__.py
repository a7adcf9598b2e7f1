"""The atlas-dagster command line."""
