"""Helpers every layer may use: entry-point error handling, endpoint parsing, the clock, child
processes. Nothing here knows about the chain.

Every module here is offered to every layer (`__all__`).
"""

__all__ = [
    "aio", "clock", "compiled", "data_dir", "decode_reasons", "descriptors", "endpoints", "entry", "events",
    "files", "logs", "network_flags", "procs", "sealed", "text", "usage_words",
]
