"""Admin JSON-RPC: the envelope and HTTP rules (server), the methods, and a small client."""
