"""The wallet's expected failures; each message is one line an operator can act on."""

from __future__ import annotations

import re

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


class OptionError(WalletError):
    """A command-line option's value cannot be used; the message starts with the option's name
    and is printed as `snode-wallet: <message>`, like click's own usage errors."""


def option_error(err: Exception, form: str) -> OptionError:
    """An endpoint parser's refusal (snode.common.endpoints) with the form spelled as --help
    spells it: the parser writes `<ip>:<port>`, which would say a host name is not taken."""
    return OptionError(re.sub(r"is not of the form \S+$", f"is not of the form {form}", str(err)))
