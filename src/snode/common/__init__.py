"""Helpers every layer may use: entry-point error handling, endpoint parsing, the clock, child
processes. Nothing here knows about the chain."""
