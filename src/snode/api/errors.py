"""JSON-RPC error codes. The negative application codes are a stable table (docs/RPC.md)."""

from __future__ import annotations

from typing import Any, Final

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

# Application errors.
MISC_ERROR: Final = -1
NOT_SERVICE_NODE: Final = -2
REGISTRATION_CMD_FAILED: Final = -3
NOT_SYNCED: Final = -4
NOT_FOUND: Final = -5
PROOF_FAILED: Final = -6
REGTEST_ONLY: Final = -7
TX_REJECTED: Final = -10
BLOCK_REJECTED: Final = -11


class RpcError(Exception):
    """A JSON-RPC error to send back: code, message and optional data."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err
