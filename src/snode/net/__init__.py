"""Peer-to-peer networking: the sans-IO protocol (framing, messages) and the asyncio peer manager."""
