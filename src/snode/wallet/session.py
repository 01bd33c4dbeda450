"""The wallet a `snode-wallet` process works on: its file, how the password is asked for, and the
open wallet (None while locked). The entry point (`wallet.cli`) makes one; the REPL
(`wallet.repl`) locks it after the idle timeout and opens it again.

On a terminal a mistyped password is asked again (PASSWORD_TRIES in all); from --password-file
or piped input there is one try. A new wallet never gets a password shorter than
keystore.MIN_PASSWORD_LENGTH (8).
"""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Final

import click

from snode.common.files import SMALL_FILE_BYTES, read_bounded
from snode.params import NetworkParams
from snode.wallet import keystore
from snode.wallet.daemon import DaemonClient
from snode.wallet.errors import WalletError, WalletFileError, WrongPassword
from snode.wallet.service import WalletService

PASSWORD_TRIES: Final = 3
"""Passwords typed on a terminal before the wallet gives up (a password file gets one try)."""


class Session:
    """The wallet file, how to get its password, and the open wallet (None while locked)."""

    def __init__(self, path: Path, params: NetworkParams, daemon: DaemonClient,
                 password_file: str | None) -> None:
        self.path = path
        self.params = params
        self.daemon = daemon
        self.password_file = password_file
        self.service: WalletService | None = None

    @property
    def typed_password(self) -> bool:
        """The password is typed on a terminal (no --password-file), so a typo can be retried."""
        return self.password_file is None and sys.stdin.isatty()

    def password(self, *, new: bool = False) -> str:
        """The password: from --password-file, the terminal, or a line of piped input.

        For a new wallet (`new`) an empty password is refused, and a terminal asks twice.
        """
        if self.password_file is not None:
            try:
                text = read_bounded(self.password_file, SMALL_FILE_BYTES).decode()
            except OSError as err:
                raise WalletError(f"cannot read password file {self.password_file}: {err.strerror}") from None
            except UnicodeDecodeError:
                raise WalletError(f"password file {self.password_file} is not text") from None
            password = text[:-1] if text.endswith("\n") else text
            if not password and not new:  # no wallet has an empty password: "wrong password" would mislead
                raise WalletError(f"password file {self.password_file} is empty: write the wallet's password "
                                  "on its first line")
            problem = keystore.new_password_problem(password) if new else None
            if problem == keystore.EMPTY_PASSWORD:
                raise WalletError(
                    f"password file {self.password_file} is empty: {problem}; write "
                    "the password on its first line"
                )
            if problem is not None:
                raise WalletError(f"password file {self.password_file}: {problem}")
            return password
        if not sys.stdin.isatty():
            line = sys.stdin.readline()
            if not line:
                raise WalletError("no password given: type it, or use --password-file")
            password = line.rstrip("\r\n")
            problem = keystore.new_password_problem(password) if new else None
            if problem is not None:
                raise WalletError(f"{problem}: give a {'longer ' if password else ''}password")
            return password
        if not new:
            return getpass.getpass("Wallet password: ")
        for _ in range(PASSWORD_TRIES - 1):
            password, problem = _typed_new_password()
            if problem is None:
                return password
            click.echo(f"Error: {problem}: try again.", err=True)
        password, problem = _typed_new_password()
        if problem is not None:
            raise WalletError(f"{problem}: run the command again")
        return password

    def open(self, password: str) -> WalletService:
        """Decrypt the wallet file and start talking to the daemon."""
        opened = keystore.load(self.path, password, self.params)
        if opened.warning is not None:
            click.echo(f"Warning: {opened.warning}", err=True)
        self.service = WalletService(opened.key, self.params, self.daemon)
        return self.service

    def open_at_start(self) -> WalletService:
        """Ask for the password and open the wallet: PASSWORD_TRIES tries when it is typed on a
        terminal, one from --password-file or piped input."""
        for _ in range(PASSWORD_TRIES - 1 if self.typed_password else 0):
            try:
                return self.open(self.password())
            except WrongPassword as err:
                click.echo(f"Error: {err}: try again.", err=True)
        return self.open(self.password())

    def create(self, seed: bytes) -> WalletService:
        """Write a new wallet file holding seed, and open it."""
        if self.path.exists():
            raise WalletFileError(f"wallet file {self.path} already exists: choose another --wallet-file")
        created = keystore.create(self.path, seed, self.password(new=True), self.params)
        self.service = WalletService(created.key, self.params, self.daemon)
        return self.service

    def lock(self) -> None:
        """Forget the key until the password is given again."""
        self.service = None


def _typed_new_password() -> tuple[str, str | None]:
    """(a new password typed twice on the terminal, what is wrong with it or None)."""
    first = getpass.getpass("Wallet password: ")
    problem = keystore.new_password_problem(first)
    if problem is not None:
        return first, problem
    if getpass.getpass("Repeat the password: ") != first:
        return first, "the two passwords differ"
    return first, None
