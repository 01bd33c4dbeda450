"""Admin JSON-RPC: the methods over the node and its services, and the admin HTTP app.

The app wires the modules in `__all__`; the rest are their helpers.
"""

__all__ = [
    "counters", "health", "methods", "omq_public", "openrpc", "scrape", "web_parts", "web_view",
]
