"""The JSON-RPC contract shared by the daemon, the wallet and the tools: error codes, the typed
records of every result, the one client, and the envelope server both RPC servers use."""
