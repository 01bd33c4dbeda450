"""Consensus test vectors (JSON files) and the code that writes and recomputes them."""
