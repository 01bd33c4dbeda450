"""`snode-wallet`: create, restore or open a wallet, then run commands.

Modes: the interactive REPL (a terminal), `--command "..."` (one command, exit status 1 when it
was refused or cancelled), a plain line loop for piped input, and `--rpc-server` (the wallet
JSON-RPC on loopback). Every expected failure prints one `Error: ...` line and exits 1; bad
command-line input is one line `snode-wallet: <option>: <reason>`, as snoded prints it.

A transaction's `(Yes/No)` question is answered once: Yes (any case) or y sends, anything else
cancels (DESIGN.md section 8). `--command` without `--yes` and without a terminal says to add
--yes when neither Yes nor No came. On a terminal an answer to "Create a new wallet?" that is
neither Yes nor No is asked again, and so is a mistyped password (`wallet.session`, which holds
the wallet this process works on; this module is only the entry point).
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import IO, Final, TextIO

import click

from snode import __version__
from snode.api.credentials import COMMAND_LINE_LOGIN, Login, client_login, cookie_dir_for
from snode.common.endpoints import ConfigError
from snode.common.files import SMALL_FILE_BYTES, default_data_dir, read_bounded
from snode.common.network_flags import given_networks, network_flags
from snode.common.usage_words import usage_words
from snode.core.errors import SnodeError
from snode.core.units import whole_number
from snode.params import MAINNET, NETWORKS, NetworkParams, ScheduleError, schedule_test_forks
from snode.wallet import commands, keystore
from snode.wallet.daemon import DaemonClient
from snode.wallet.errors import OptionError, WalletError, WalletFileError
from snode.wallet.logic import is_unclear
from snode.wallet.service import WalletService
from snode.wallet.session import Session

PROG: Final = "snode-wallet"
DEFAULT_IDLE_TIMEOUT: Final = 600
"""Seconds without input after which the REPL locks the wallet."""
MAX_IDLE_TIMEOUT: Final = 999_999_999
"""The longest --idle-timeout (about 31 years; every number of 9 digits): a longer one is a typo."""


def default_wallet_file(params: NetworkParams) -> Path:
    """Where a wallet lives when --wallet-file is not given."""
    return Path.home() / ".snode" / params.name / "wallet"


def _echo(lines: tuple[str, ...]) -> None:
    for line in lines:
        click.echo(line)


def _network(testnet: bool, devnet: bool, regtest: bool) -> NetworkParams:
    chosen = given_networks(testnet, devnet, regtest)
    if len(chosen) > 1:
        raise OptionError("choose one network: " + " or ".join(f"--{n}" for n in chosen))
    return NETWORKS[chosen[0]] if chosen else MAINNET


def _start(session: Session, generate: bool, restore_seed_file: str | None, interactive: bool) -> WalletService:
    if generate and restore_seed_file:
        raise OptionError("--generate and --restore-seed-file exclude each other: give one")
    if restore_seed_file is not None:
        try:
            words = read_bounded(restore_seed_file, SMALL_FILE_BYTES).decode()
        except OSError as err:
            raise WalletError(f"cannot read seed file {restore_seed_file}: {err.strerror}") from None
        except UnicodeDecodeError:
            raise WalletError(f"seed file {restore_seed_file} is not text") from None
        seed = keystore.words_to_seed(words)
        service = session.create(seed)
        click.echo(f"Restored wallet {service.address} into {session.path}")
        return service
    if not generate and not session.path.exists() and interactive:
        question = f"Wallet file {session.path} does not exist. Create a new wallet? (Yes/No): "
        answer = input(question)
        if is_unclear(answer):
            click.echo(commands.ASK_AGAIN)
            answer = input(question)
        generate = commands.is_yes(answer)
        if not generate:
            raise WalletFileError(f"wallet file {session.path} does not exist: create one with --generate")
    if generate:
        seed = keystore.new_seed()
        service = session.create(seed)
        click.echo(f"Generated new wallet {service.address} in {session.path}")
        click.echo("Seed words (write them down and keep them secret; they are shown only this once):")
        click.echo(keystore.seed_to_words(seed))
        return service
    if not session.path.exists():
        raise WalletFileError(
            f"wallet file {session.path} does not exist: create one with --generate or "
            "--restore-seed-file"
        )
    return session.open_at_start()


def _wallet_file(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """--wallet-file, refused in one line when it names a directory."""
    if value is not None and value.is_dir():
        raise click.UsageError(
            f"--wallet-file: '{value}' is a directory: give the path of a wallet file, such as "
            f"{os.path.join(value, 'wallet')}"
        )
    return value


def _idle_seconds(ctx: click.Context, param: click.Parameter, value: str) -> int:
    """--idle-timeout as whole seconds, refused in one line naming the option otherwise."""
    seconds = whole_number(str(value).strip(), len(str(MAX_IDLE_TIMEOUT)))
    if seconds is None:
        raise click.UsageError(
            f"--idle-timeout: '{str(value)[:40]}' is not a number of seconds from 0 to {MAX_IDLE_TIMEOUT} "
            "(0: never lock)"
        )
    return seconds


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="snode-wallet", message="%(prog)s v%(version)s")
@click.option("--wallet-file", type=click.Path(path_type=Path), callback=_wallet_file,
              help="Wallet file [default: ~/.snode/<network>/wallet].")
@click.option("--daemon-address", "--rpc", "daemon_address", metavar="HOST:PORT",
              help="Admin RPC of snoded, HOST:PORT or http://HOST:PORT; HOST an IP address or a host "
                   "name (--rpc is the same option, as in snode-cli) [default: 127.0.0.1:<network's "
                   "admin RPC port>].")
@network_flags
@click.option("--test-fork", "test_forks", multiple=True, metavar="NAME@HEIGHT",
              help="Devnet/regtest: the daemon's --test-fork schedule, to sign for its forks (repeatable).")
@click.option("--password-file", metavar="FILE",
              help="Read the password from the first line of FILE (never give it on the command line).")
@click.option("--command", "command_line", metavar="COMMAND", help='Run one command, e.g. "balance", and exit.')
@click.option("--yes", is_flag=True, help="Answer Yes to the confirmation of --command.")
@click.option("--generate", is_flag=True, help="Create a new wallet at --wallet-file.")
@click.option("--restore-seed-file", metavar="FILE", help="Create the wallet from the 24 seed words in FILE.")
@click.option("--idle-timeout", metavar="SECONDS", default=str(DEFAULT_IDLE_TIMEOUT), callback=_idle_seconds,
              show_default=True, help="Seconds without input before the REPL locks the wallet (0: never).")
@click.option("--rpc-server", is_flag=True, help="Serve the wallet JSON-RPC instead of the REPL.")
@click.option("--rpc-bind", metavar="HOST:PORT",
              help="Wallet RPC bind, loopback only [default: 127.0.0.1:<network's wallet RPC port>]; "
                   "implies --rpc-server.")
@click.option("--rpc-login-file", metavar="FILE",
              help="The wallet RPC's login user:pass in FILE [SNODE_RPC_LOGIN, else a new cookie in "
                   "<wallet-file>.rpc-cookie].")
@click.option("--rpc-login", hidden=True, help="Refused: a login on the command line is public.")
@click.option("--disable-rpc-login", is_flag=True,
              help="Serve the wallet RPC without a login: any process of any user of this machine may spend.")
@click.option("--data-dir", metavar="PATH",
              help="snoded's data dir, where it keeps its RPC cookie when its admin RPC is not on "
                   "loopback [~/.snode, ~/.snode/<network>].")
@click.option("--daemon-login-file", metavar="FILE", help="Send snoded the admin RPC login user:pass in FILE.")
def cli(
    wallet_file: Path | None, daemon_address: str | None, testnet: bool, devnet: bool, regtest: bool,
    password_file: str | None, command_line: str | None, yes: bool, generate: bool,
    restore_seed_file: str | None, idle_timeout: int, rpc_server: bool, rpc_bind: str | None,
    rpc_login_file: str | None, rpc_login: str | None, disable_rpc_login: bool, data_dir: str | None,
    daemon_login_file: str | None, test_forks: tuple[str, ...],
) -> None:
    """The snode wallet: balances, transfers, service-node registration and staking."""
    try:
        params = schedule_test_forks(_network(testnet, devnet, regtest), test_forks)
    except ScheduleError as err:
        raise OptionError(f"--test-fork: {err}") from None
    address = daemon_address or f"127.0.0.1:{params.rpc_port}"
    daemon = DaemonClient(address, login=_daemon_login(params, address, data_dir, daemon_login_file))
    session = Session(wallet_file or default_wallet_file(params), params, daemon, password_file)
    serve = rpc_server or rpc_bind is not None
    if rpc_login is not None:
        raise OptionError(COMMAND_LINE_LOGIN)
    if not serve and (rpc_login_file is not None or disable_rpc_login):
        option = "--rpc-login-file" if rpc_login_file is not None else "--disable-rpc-login"
        raise OptionError(f"{option}: it is about the wallet RPC: add --rpc-server (or --rpc-bind)")
    if serve:
        from snode.wallet.rpc_server import check_bind, rpc_access

        bind = check_bind(rpc_bind or f"127.0.0.1:{params.wallet_rpc_port}")
        held = _serving_lock(session.path)  # noqa: F841 (held while this process serves)
        access = rpc_access(session.path, bind, rpc_login_file, disable_rpc_login, os.environ)
    interactive = sys.stdin.isatty() and command_line is None and not serve
    service = _start(session, generate, restore_seed_file, interactive)
    if serve:
        from snode.wallet.rpc_server import serve_forever

        asyncio.run(serve_forever(service, bind, access))
        return
    if command_line is not None:
        sys.exit(_one_shot(service, command_line, yes))
    if interactive:
        from snode.wallet.repl import run_repl

        asyncio.run(run_repl(session, idle_timeout))
        return
    sys.exit(_plain_loop(service, sys.stdin))


def _serving_lock(wallet: Path) -> IO[str]:
    """`<wallet>.lock`, held while this process serves the wallet's RPC: a second server of one
    wallet file once overwrote the first's cookie, then removed it at its stop."""
    from snode.common.data_dir import DirLocked, lock_file

    try:
        return lock_file(wallet.with_name(wallet.name + ".lock"))
    except DirLocked as held:
        raise OptionError(f"--rpc-server: {wallet} is served by another snode-wallet (pid {held.holder}); "
                          "stop it first, or use its RPC") from None
    except OSError as err:
        raise OptionError(f"--rpc-server: cannot lock {wallet}: {err.strerror or err}") from None


def _daemon_login(params: NetworkParams, address: str, data_dir: str | None,
                  login_file: str | None) -> Login | None:
    """What the wallet sends snoded: --daemon-login-file, else the cookie of a daemon whose admin
    RPC is not on loopback, in --data-dir or this network's default data dir (none there: the
    daemon is on loopback and needs nothing). SNODE_RPC_LOGIN is the wallet RPC's own login."""
    try:
        directory = cookie_dir_for(data_dir, default_data_dir(params.name), address)
        return client_login(login_file, {}, directory, option="--daemon-login-file")
    except ConfigError as err:
        raise OptionError(str(err)) from None


def _one_shot(service: WalletService, line: str, yes: bool) -> int:
    reply = commands.run(service, line)
    _echo(reply.lines)
    if reply.pending is not None:
        terminal = sys.stdin.isatty()
        if yes:
            answer: str | None = "Yes"
            click.echo(reply.pending.question + "Yes")
        elif terminal:
            answer = input(reply.pending.question)
        else:
            click.echo(reply.pending.question)
            answer = sys.stdin.readline() or None
        reply = commands.confirm(service, reply.pending, answer)
        if not terminal and not yes and (answer is None or is_unclear(answer)):  # not a plain No
            reply = replace(reply, lines=(f"{commands.CANCELLED} {commands.YES_HINT}",))
        _echo(reply.lines)
    return 0 if reply.ok else 1


def _plain_loop(service: WalletService, stream: TextIO) -> int:
    """Commands from piped input, one a line; a confirmation reads the next line."""
    status = 0
    for line in stream:
        reply = commands.run(service, line)
        _echo(reply.lines)
        if reply.pending is not None:
            click.echo(reply.pending.question)
            reply = commands.confirm(service, reply.pending, stream.readline() or None)
            _echo(reply.lines)
        if not reply.ok:
            status = 1
        if reply.exit:
            break
    return status


def main() -> None:
    """Console-script entry point: no traceback for anything a user can do. Bad command-line
    input is one line `snode-wallet: <reason>` and exit status 1, as snoded's (snode.common.entry,
    whose printing of every other failure the wallet does not share: those are `Error: ...`)."""
    try:
        cli.main(prog_name=PROG, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(1)
    except click.ClickException as err:
        click.echo(f"{PROG}: {usage_words(err)}", err=True)
        sys.exit(1)
    except OptionError as err:
        click.echo(f"{PROG}: {err}", err=True)
        sys.exit(1)
    except SnodeError as err:
        click.echo(f"Error: {err}", err=True)
        sys.exit(1)
    except (KeyboardInterrupt, EOFError):
        click.echo("", err=True)
        sys.exit(1)
    except SystemExit:
        raise
    sys.exit(0)

