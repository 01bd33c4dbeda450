"""The wallet's expected failures; each message is one line an operator can act on."""

from __future__ import annotations

from snode.core.errors import SnodeError


class WalletError(SnodeError):
    """A wallet command or wallet file operation was refused."""


class WalletFileError(WalletError):
    """The wallet file is missing, unreadable, corrupted, or the password is wrong."""


class WrongPassword(WalletFileError):
    """The password does not open the wallet file (the file itself is intact)."""


class DaemonError(WalletError):
    """The daemon could not be reached or answered with an error."""

    def __init__(self, reason: str, code: int | None = None) -> None:
        super().__init__(reason)
        self.code = code
