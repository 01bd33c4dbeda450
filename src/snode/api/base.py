"""The base records of the admin RPC's parameters and results (`snode.api.types`)."""

from __future__ import annotations

import msgspec


class Params(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the parameter records."""


class Result(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Base of the result records."""
