"""Validation of a tenant-day's export: footers before the INSERT, every row's rules inside it."""
