"""Reusable constructs, one per module, each named for what it is."""
