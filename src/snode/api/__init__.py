"""The JSON-RPC contract shared by the daemon, the wallet and the tools: error codes, the typed
records of every result, the one client, and the envelope server both RPC servers use.

Others use the modules in `__all__`; the rest serves them.
"""

__all__ = [
    "base", "client", "connections", "credentials", "errors", "invalid_params", "openrpc", "records",
    "server", "types",
]
