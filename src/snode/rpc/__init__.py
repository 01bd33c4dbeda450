"""Admin JSON-RPC: the methods over the node and its services, and the admin HTTP app."""
