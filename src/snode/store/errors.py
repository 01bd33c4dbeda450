"""The store's expected failure: a database this node cannot use, or a write the disk refused."""

from __future__ import annotations

from snode.core.errors import SnodeError


class StoreError(SnodeError):
    """The data dir's database cannot be opened, read or written; the reason says what to do."""
