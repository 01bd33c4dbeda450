"""snode-cli: the operator's view of a daemon over its admin RPC.

`status`, `nodes`, `blocks`, `watch`, `call METHOD [JSON]`, `register-cmd`, `key export|import|show`
(the service-node key of a data dir, moved in a passphrase-sealed file: `snode.tools.keys`),
`fleet` (many daemons, one line each: `snode.tools.fleet`);
`--json` prints the raw result on any command. Every failure is one line on stderr and exit code 1.

What the daemon says may hold text from the network (a peer's words, a chain record): every
string of an answer printed for people goes through `common.text.printable` (`_shown`), so no
terminal escape or forged line reaches the operator's terminal; `--json` output is JSON, whose
encoder escapes control characters itself.
"""

from __future__ import annotations

import http.client
import json
import os
import time
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec

from snode import __version__
from snode.api.client import RpcClient, RpcFailure, RpcUnavailable
from snode.api.credentials import Login, client_login, cookie_dir_for
from snode.api.types import (
    BlockResult,
    HeightResult,
    InfoResult,
    RegistrationCmdParams,
    RegistrationCmdResult,
    ServiceNodesResult,
    ServiceNodeState,
    sync_state,
)
from snode.common.data_dir import KEY_FILE
from snode.common.endpoints import ConfigError, parse_http_url
from snode.common.entry import run_command
from snode.common.files import default_data_dir
from snode.common.network_flags import given_networks, network_flags
from snode.common.text import printable
from snode.core.errors import InvalidAmount
from snode.core.units import coin_word, counted, format_coins, parse_coins, whole_number
from snode.params import COIN, NETWORKS
from snode.tools import fleet as fleet_tools
from snode.tools import keys
from snode.tools.tables import block_table, make_console, service_node_table

T = TypeVar("T")


class CliError(click.ClickException):
    """One line on stderr, exit code 1 (printed by `entry.run_command`)."""


def _client(ctx: click.Context) -> RpcClient:
    obj = ctx.obj
    url = obj["rpc"] or f"http://127.0.0.1:{NETWORKS[obj['network']].rpc_port}"
    try:
        return RpcClient(parse_http_url("--daemon-address", url), login=_login(obj))
    except ConfigError as err:
        raise CliError(str(err)) from None


def _daemon_url(rpc: str | None, network: str | None, node: str | None, base_dir: Path | None) -> str | None:
    """The admin RPC the command talks to: --daemon-address; with --devnet, the devnet process
    --node names (or the first running one when base_dir holds a devnet); None: the network's
    default on 127.0.0.1."""
    if node is not None and rpc is not None:
        raise CliError("--node and --daemon-address both name the daemon: give one")
    if node is not None and network not in (None, "devnet"):
        raise CliError(f"--node names a process of a devnet; it does not go with --{network}")
    if rpc is not None or (network != "devnet" and node is None):
        return rpc
    from snode.tools.devnet_procs import default_base_dir, devnet_node

    entry = devnet_node((base_dir or default_base_dir()).resolve(), node)
    return entry.rpc_url if entry is not None else None


def _login(obj: dict[str, Any]) -> Login | None:
    """The admin RPC login to send: --rpc-login-file, SNODE_RPC_LOGIN, or the cookie a daemon
    bound off loopback wrote in --data-dir (default: this network's default data dir)."""
    url = obj["rpc"] or f"http://127.0.0.1:{NETWORKS[obj['network']].rpc_port}"
    cookies = cookie_dir_for(obj["data_dir"], default_data_dir(obj["network"]), url)
    return client_login(obj["login_file"], os.environ, cookies)


def _call(ctx: click.Context, method: str, params: Any, result_type: type[T]) -> T:
    """The result as `result_type` (`object`: plain JSON values)."""
    client = _client(ctx)
    try:
        return client.call_typed(method, params, result_type)
    except RpcUnavailable as err:
        raise CliError(str(err)) from None
    except RpcFailure as err:
        message = err.message if err.message.startswith(method) else f"{method}: {err.message}"
        raise CliError(printable(message, WIDE)) from None
    finally:
        client.close()


WIDE = 2_000
"""Characters of one printed line at most (a status line, an event, an error)."""


def _shown(text: str) -> str:
    """A daemon's text as it may reach a terminal: `printable`, one line."""
    return printable(text, WIDE)


def _print_json(value: Any) -> None:
    click.echo(json.dumps(msgspec.to_builtins(value), indent=2))


@click.group(context_settings={"help_option_names": ["--help", "-h"]})
@click.version_option(__version__, "--version", prog_name="snode-cli", message="%(prog)s v%(version)s")
@click.option("--daemon-address", "--rpc", "rpc", metavar="HOST:PORT",
              help="Admin RPC of snoded, HOST:PORT or http://HOST:PORT (--rpc is the same option) "
                   "[127.0.0.1:<network's admin RPC port>; with --devnet, the devnet's first running "
                   "process].")
@click.option("--data-dir", metavar="PATH",
              help="The daemon's data dir, where it keeps its RPC cookie when its admin RPC is not on "
                   "loopback [~/.snode, ~/.snode/<network>].")
@click.option("--rpc-login-file", "login_file", metavar="FILE",
              help="Send the admin RPC login user:pass in FILE [SNODE_RPC_LOGIN, else the cookie].")
@click.option("--json", "as_json", is_flag=True, help="Print the raw JSON result.")
@network_flags
@click.option("--node", metavar="NAME", help="With --devnet: the devnet process to ask (authority, node1, ...).")
@click.option("--base-dir", type=click.Path(file_okay=False, path_type=Path),
              help="With --devnet: where the devnet lives [./devnet, or $SNODE_DEVNET_DIR].")
@click.option("--omq", metavar="tcp://HOST:PORT", help="`call` a daemon's public OMQ port instead of its admin RPC.")
@click.option("--server-key", metavar="HEX", help="With --omq: the daemon's service_node_x25519_pubkey.")
@click.pass_context
def cli(ctx: click.Context, rpc: str | None, data_dir: str | None, login_file: str | None, as_json: bool,
        testnet: bool, devnet: bool, regtest: bool, node: str | None, base_dir: Path | None, omq: str | None,
        server_key: str | None) -> None:
    """snode-cli: watch and drive a snoded over its admin RPC (or its public OMQ port)."""
    chosen = given_networks(testnet, devnet, regtest)
    if len(chosen) > 1:
        raise CliError(f"--{chosen[0]} and --{chosen[1]}: give at most one network flag")
    network = chosen[0] if chosen else None
    ctx.obj = {"rpc": _daemon_url(rpc, network, node, base_dir), "json": as_json,
               "network": network or "mainnet", "omq": omq, "server_key": server_key,
               "data_dir": data_dir, "login_file": login_file, "base_dir": base_dir}


@cli.command()
@click.pass_context
def status(ctx: click.Context) -> None:
    """The daemon's status line, height and sync state."""
    info = _call(ctx, "get_info", None, InfoResult)
    if ctx.obj["json"]:
        return _print_json(info)
    click.echo(_shown(info.status_line))
    sync = sync_state(info.network, info.target_height, info.peer_count)
    pool = info.mempool_size
    click.echo(_shown(f"network {info.network}, height {info.height}, {sync}, "
                      f"mempool {counted(pool, 'transaction')}, {counted(info.peer_count, 'peer')}"))
    if info.last_uptime_proof_rejection:
        click.echo(_shown(f"last uptime proof rejection: {info.last_uptime_proof_rejection}"))
    if info.next_fork is not None:
        click.echo(_shown(info.next_fork.summary))
    if info.upgrade_required is not None:
        click.echo(_shown(f"UPGRADE REQUIRED: fork {info.upgrade_required.fork} at height "
                          f"{info.upgrade_required.height}: {info.upgrade_required.action}"))
    for line in [*snapshot_lines(info), *standing_lines(info)]:
        click.echo(_shown(line))


def snapshot_lines(info: InfoResult) -> list[str]:
    """What `status` says of a start from a snapshot: the download with a bar, then where the
    node's history starts."""
    lines = []
    download = info.snapshot_download
    if download is not None and not download.done:
        share = download.bytes / download.total_bytes if download.total_bytes else 0.0
        bar = "#" * round(share * 20)
        eta = f", ETA {download.eta} s" if download.eta else ""
        lines.append(f"snapshot {download.height}: [{bar:-<20}] {share:.0%} {download.chunks}/{download.total_chunks} "
                     f"chunks, {download.bytes:,}/{download.total_bytes:,} bytes from "
                     f"{counted(download.peers, 'peer')}{eta}")
    if info.history_start > 1 and info.history_verified:
        lines.append(f"history: verified (started from the snapshot of height {info.history_start}; the blocks "
                     "below are backfilled and their replay from genesis reached its state root)")
    elif info.history_start > 1 and info.history_percent == 100 and info.history_checked:
        lines.append(f"history: complete, checking: {info.history_checked * 100 // info.history_start} % "
                     f"(the replay from genesis is at block {info.history_checked} of {info.history_start})")
    elif info.history_start > 1 and info.history_percent == 100:
        lines.append(f"history: complete (started from the snapshot of height {info.history_start}; the blocks "
                     "below are backfilled)")
    elif info.history_start > 1 and info.history_backfilled:
        lines.append(f"history: {info.history_percent} % (blocks up to {info.history_backfilled} of "
                     f"{info.history_start - 1} below the snapshot backfilled)")
    elif info.history_start > 1:
        lines.append(f"history: from height {info.history_start} (started from its snapshot; the blocks below are "
                     "not downloaded)")
    return lines


def standing_lines(info: InfoResult) -> list[str]:
    """What `status` adds on this service node's standing (get_info's fields): the credit's
    warning, how the key left the registry, a registration waiting in the mempool."""
    lines = []
    if info.credit_warning:
        lines.append(f"WARNING: downtime {info.credit_warning}")
    d = info.departure
    if d is not None and d.kind == "deregistered":
        # "in N blocks" to the height it names, as the status line counts (stakes_locked_blocks
        # counts to the tip a wallet may send them from, one less: `stakes` says that height)
        lock = (f"stakes locked, spendable from height {d.stakes_unlock_height} (in "
                f"{counted(d.stakes_unlock_height - info.height, 'block')})" if d.stakes_locked_blocks
                else f"stakes spendable since height {d.stakes_unlock_height}")
        lines.append(f"deregistered at height {d.height} for {d.reason}; {lock}; register the key "
                     "again to serve (get_service_node_registration_cmd)")
    elif d is not None:
        lines.append(f"left the registry at height {d.height} ({d.kind}); stakes returned, spendable "
                     f"from height {d.stakes_unlock_height}")
    if info.registration_pending:
        lines.append("registration pending: the registration waits in the mempool for a block")
    return lines


@cli.command()
@click.pass_context
def nodes(ctx: click.Context) -> None:
    """The service-node list: status, fee, stake, contributors, proof age."""
    result = _call(ctx, "get_service_nodes", {}, ServiceNodesResult[ServiceNodeState])
    if ctx.obj["json"]:
        return _print_json(result)
    if not result.service_node_states:
        click.echo(f"no service nodes registered (height {result.height})")
        return
    records = msgspec.to_builtins(result.service_node_states)
    make_console().print(service_node_table(records, now=int(time.time())))


@cli.command()
@click.argument("method")
@click.argument("params", required=False)
@click.pass_context
def call(ctx: click.Context, method: str, params: str | None) -> None:
    """Call any RPC METHOD with optional JSON PARAMS (an object)."""
    parsed: Any = None
    if params is not None:
        try:
            parsed = json.loads(params)
        except ValueError as err:
            raise CliError(f"PARAMS is not valid JSON: {err}; example: '{{\"blocks\": 1}}'") from None
    if ctx.obj["omq"] is not None:
        from snode.tools.omq_client import OmqError, omq_call, parse_server_key

        try:
            return _print_json(omq_call(ctx.obj["omq"], parse_server_key(ctx.obj["server_key"]), method, parsed))
        except OmqError as err:
            raise CliError(str(err)) from None
    _print_json(_call(ctx, method, parsed, object))


MAX_BLOCKS_SHOWN = 1_000


@cli.command()
@click.option("--count", default="10", show_default=True, metavar="N", help="How many of the last blocks (1 to 1,000).")
@click.pass_context
def blocks(ctx: click.Context, count: str) -> None:
    """The last blocks: height, age, producer, round, validator signatures, transactions."""
    shown = whole_number(count, 4)
    if shown is None or not 1 <= shown <= MAX_BLOCKS_SHOWN:
        raise CliError(f"--count: '{count[:40]}' is not a number of blocks from 1 to {MAX_BLOCKS_SHOWN:,}")
    top = _call(ctx, "get_height", None, HeightResult).height
    heights = range(top, max(top - shown, -1), -1)
    found = [_call(ctx, "get_block", {"height": h}, BlockResult) for h in heights]
    if ctx.obj["json"]:
        return _print_json([{k: v for k, v in msgspec.to_builtins(b).items() if k != "block_hex"} for b in found])
    make_console().print(block_table(found, now=int(time.time())))


def _atomic(text: str) -> int:
    try:
        return parse_coins(text)
    except InvalidAmount as err:
        hint = ""
        atomic = whole_number(text)
        if atomic is not None and atomic >= COIN:
            hint = (f"; --amount is in coins: {text} atomic units would be "
                    f"--amount {format_coins(atomic)}")
        raise CliError(f"--amount: {err}{hint}") from None


@cli.command("register-cmd")
@click.option("--cut", default="0", show_default=True, metavar="PERCENT",
              help="Operator fee, 0 to 10 percent (5 or 5%).")
@click.option("--address", "addresses", multiple=True, required=True, metavar="ADDR",
              help="Contributor address; the operator's first (repeatable).")
@click.option("--amount", "amounts", multiple=True, required=True, metavar="COINS",
              help="Amount in coins for the --address at the same position (repeatable).")
@click.pass_context
def register_cmd(ctx: click.Context, cut: str, addresses: tuple[str, ...], amounts: tuple[str, ...]) -> None:
    """Print the registration command to paste into snode-wallet."""
    if len(addresses) != len(amounts):
        raise CliError(f"give one --amount per --address ({counted(len(addresses), 'address', 'addresses')}, "
                       f"{counted(len(amounts), 'amount')})")
    params = RegistrationCmdParams(
        operator_cut=cut.removesuffix("%"), contributor_addresses=list(addresses),
        contributor_amounts=[_atomic(a) for a in amounts],
    )
    result = _call(ctx, "get_service_node_registration_cmd", params, RegistrationCmdResult)
    if ctx.obj["json"]:
        return _print_json(result)
    click.echo(result.registration_cmd)


# --- many nodes -----------------------------------------------------------------------------

@cli.command()
@click.option("--rpc", "--daemon-address", "urls", multiple=True, metavar="HOST:PORT",
              help="A node's admin RPC (repeatable); its address names it.")
@click.option("--node", "names", multiple=True, metavar="NAME",
              help="With --devnet: a devnet process (repeatable) [every process of the devnet].")
@click.option("--fleet-file", type=click.Path(path_type=Path), metavar="FILE",
              help="Nodes one a line: NAME ADDRESS [LOGIN_FILE] (ADDRESS: HOST:PORT of its admin RPC; "
                   "LOGIN_FILE: user:pass on its first line, e.g. the daemon's rpc.cookie); # comments.")
@click.pass_context
def fleet(ctx: click.Context, urls: tuple[str, ...], names: tuple[str, ...], fleet_file: Path | None) -> None:
    """Many nodes at a glance, one line each: state and reason, proof age, downtime credit,
    height and lag (behind the highest of them), version, next fork (when the daemon tells it),
    last reward. All are asked at once, each call within a few seconds; a node that cannot be
    reached is a line saying so. --json: one object a line. Exit 0 once every node had its line."""
    obj = ctx.obj
    try:
        members = fleet_tools.members_from(
            urls, _devnet_members(obj, names), lambda url: _login({**obj, "rpc": url}),
            fleet_tools.parse_fleet_file(fleet_file) if fleet_file is not None else [])
    except (fleet_tools.FleetError, ConfigError) as err:
        raise CliError(str(err)) from None
    views = fleet_tools.look_all(members)
    if obj["json"]:
        top = max((v.height for v in views if not v.error), default=0)
        for view in views:
            click.echo(json.dumps(fleet_tools.as_json(view, top)))
        return
    for line in fleet_tools.lines(views):
        click.echo(_shown(line))


def _devnet_members(obj: dict[str, Any], names: tuple[str, ...]) -> list[tuple[str, str]]:
    """(name, admin RPC) of the devnet processes --node names; with --devnet and no other node
    given, all of them."""
    if obj["network"] != "devnet":
        if names:
            raise CliError(f"fleet --node names a process of a devnet; it does not go with --{obj['network']}")
        return []
    from snode.tools.devnet_procs import Devnet, default_base_dir

    devnet = Devnet.load((obj["base_dir"] or default_base_dir()).resolve())
    chosen = [devnet.entry(n) for n in names] if names else devnet.nodes
    return [(entry.name, entry.rpc_url) for entry in chosen]


# --- the service-node key ------------------------------------------------------------------

@cli.group()
def key() -> None:
    """The service-node key of a data dir (--data-dir, default the network's): `export FILE` to a
    passphrase-sealed file, `import FILE` into a data dir (a new node's), `show`. With
    --daemon-address (or --devnet --node), each says whether the chain has the key registered."""


PASSWORD_FILE_HELP = "Read the passphrase from the first line of FILE (never give it on the command line)."


def _late_data_dir(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """`--data-dir` after `key ...` as before it (`snode-cli --data-dir D key show`); given both
    ways, the two must agree."""
    if value is None:
        return
    given = ctx.obj.get("data_dir")
    if given is not None and Path(given).expanduser() != Path(value).expanduser():
        raise CliError(f"--data-dir given twice, as {given} and as {value}; give it once")
    ctx.obj["data_dir"] = value


key_data_dir_option = click.option(
    "--data-dir", metavar="PATH", expose_value=False, callback=_late_data_dir,
    help="The data dir whose key this is (also accepted before the command) [the network's default].")


@key.command("export")
@key_data_dir_option
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--password-file", metavar="FILE", help=PASSWORD_FILE_HELP)
@click.option("--force", is_flag=True, help="Replace FILE if it exists.")
@click.pass_context
def key_export(ctx: click.Context, file: Path, password_file: str | None, force: bool) -> None:
    """Write the data dir's service-node key to FILE, sealed with a passphrase (asked for, or
    --password-file; Argon2id as the wallet file). The daemon may keep running."""
    data_dir = _key_data_dir(ctx.obj)
    try:
        found = keys.data_dir_key(data_dir)
        keys.check_network(data_dir, ctx.obj["network"])
        sealed = keys.sealed_key(found.key, keys.passphrase(password_file, new=True), ctx.obj["network"])
        keys.write_export(file, sealed, force=force)
    except keys.KeyCommandError as err:
        raise CliError(str(err)) from None
    if ctx.obj["json"]:
        return _print_json({"service_node_pubkey": found.key.public.hex(), "file": str(file)})
    click.echo(f"service-node key {found.key.public.hex()} of {data_dir} exported to {file} (sealed, mode 0600)")


@key.command("import")
@key_data_dir_option
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--password-file", metavar="FILE", help=PASSWORD_FILE_HELP)
@click.option("--force", is_flag=True, help="Replace the data dir's own service-node key (it is lost unless exported).")
@click.pass_context
def key_import(ctx: click.Context, file: Path, password_file: str | None, force: bool) -> None:
    """Make the key in FILE (from `key export`) the data dir's service-node key; the data dir
    is made if missing. Refused while a snoded runs the data dir. Stop the node that ran the key
    before starting one here: two at once are stopped by the doppelganger check."""
    data_dir = _key_data_dir(ctx.obj)
    try:
        keys.check_network(data_dir, ctx.obj["network"])
        doc, box = keys.read_export(file, ctx.obj["network"])
        imported = keys.opened_key(file, doc, box, keys.passphrase(password_file, new=False))
        written = keys.install_key(data_dir, imported, force=force)
    except keys.KeyCommandError as err:
        raise CliError(str(err)) from None
    done = "imported into" if written else "already the key of"
    _show_key(ctx, imported.public.hex(), data_dir / KEY_FILE, f"service-node key {{}} {done} {data_dir}")


@key.command("show")
@key_data_dir_option
@click.pass_context
def key_show(ctx: click.Context) -> None:
    """The data dir's service-node key: its public key, its file, whether it is registered."""
    try:
        found = keys.data_dir_key(_key_data_dir(ctx.obj))
    except keys.KeyCommandError as err:
        raise CliError(str(err)) from None
    _show_key(ctx, found.key.public.hex(), found.path, "service-node key {}")


def _key_data_dir(obj: dict[str, Any]) -> Path:
    return Path(obj["data_dir"]).expanduser() if obj["data_dir"] else default_data_dir(obj["network"])


def _show_key(ctx: click.Context, pubkey: str, path: Path, headline: str) -> None:
    """The key's lines (`headline` with the key in its `{}`), its file and its registration."""
    record, checked = _registration(ctx, pubkey)
    if ctx.obj["json"]:
        return _print_json({
            "service_node_pubkey": pubkey, "file": str(path),
            "registered": None if record is None and checked.startswith("not checked") else record is not None,
            "registration_height": record.registration_height if record is not None else None,
            "status": record.status if record is not None else None,
        })
    click.echo(headline.format(pubkey))
    click.echo(f"file: {path}")
    click.echo(_shown(f"registration: {checked}"))


def _registration(ctx: click.Context, pubkey: str) -> tuple[ServiceNodeState | None, str]:
    """The key's record on the chain of the daemon given with --daemon-address (or --devnet
    --node), and the line that says so; (None, why) when it is not registered or not checked."""
    if ctx.obj["rpc"] is None:
        return None, ("not checked: no daemon given (add --daemon-address HOST:PORT of a synced "
                      "snoded to ask its chain)")
    try:
        found = _call(ctx, "get_service_nodes", {"service_node_pubkeys": [pubkey]},
                      ServiceNodesResult[ServiceNodeState])
    except CliError as err:
        return None, f"not checked: {err.message}"
    record = next((r for r in found.service_node_states if r.service_node_pubkey == pubkey), None)
    if record is None:
        return None, f"not registered on the chain of {ctx.obj['rpc']} (height {found.height})"
    why = record.last_state_change_reason
    reason = f" ({why})" if record.status == "Decomm" and why else ""
    return record, (f"registered at height {record.registration_height}, {record.status}{reason} "
                    f"(chain of {ctx.obj['rpc']} at height {found.height})")


WATCH_SILENCE = 60.0
MAX_EVENT_LINE = 1 << 20
"""The longest line of the event stream read (an event is a few hundred bytes)."""
"""Seconds without a byte (the daemon sends a keep-alive every 15 s) before `watch` gives up."""
WATCH_CLOSED = "watch: the daemon closed the event stream (stopped, or this client fell behind)"


@cli.command()
@click.option("--count", default=None, type=click.IntRange(min=1), metavar="N",
              help="Stop after N events (default: until Ctrl-C).")
@click.option("--proofs", is_flag=True,
              help="Also a line for each accepted uptime proof (one every few minutes per peer that "
                   "acknowledges it; refused proofs are always shown).")
@click.pass_context
def watch(ctx: click.Context, count: int | None, proofs: bool) -> None:
    """Print the daemon's events as they happen: blocks, this node's state changes, refused
    proofs, rewards, syncs, bans (accepted proofs with --proofs). --json: every event, one JSON
    object per line."""
    # First the call `status` makes, by the same path: a daemon that is not there (or is not a
    # snoded) gets the same one line as on every other command, not a socket error.
    _call(ctx, "get_info", None, InfoResult)
    client = _client(ctx)
    conn = http.client.HTTPConnection(client.host, client.port, timeout=WATCH_SILENCE)
    try:
        conn.request("GET", "/events", headers={**client.headers, "Accept": "text/event-stream"})
        response = conn.getresponse()
        if response.status != 200:
            raise CliError(_shown(f"watch: the daemon answered {response.status}: "
                                  f"{response.read(300).decode(errors='replace').strip()}"))
        seen = 0
        while raw := response.readline(MAX_EVENT_LINE + 1):
            if len(raw) > MAX_EVENT_LINE:
                raise CliError(f"watch: the daemon sent an event line over {MAX_EVENT_LINE:,} bytes")
            line = raw.decode(errors="replace").rstrip("\r\n")
            if not line.startswith("data: "):
                continue
            shown = watch_line(json.loads(line[len("data: "):]), as_json=ctx.obj["json"], proofs=proofs)
            if shown is None:
                continue
            click.echo(shown)
            seen += 1
            if count is not None and seen >= count:
                return
        raise CliError(WATCH_CLOSED)
    except (ConnectionError, http.client.HTTPException):
        raise CliError(WATCH_CLOSED) from None
    except OSError as err:
        raise CliError(f"watch: no event stream from {client.url}: {err.strerror or err}") from None
    finally:
        conn.close()


def watch_line(event: dict[str, Any], *, as_json: bool, proofs: bool) -> str | None:
    """What `watch` prints for an event: its JSON with --json; else its line, except an accepted
    uptime proof without --proofs (the status line's proof age says the same, once)."""
    if as_json:
        return json.dumps(event)
    if event.get("event") == "proof_accepted" and not proofs:
        return None
    return event_line(event)


def event_line(event: dict[str, Any]) -> str:
    """One event as a line for people: `14:02:07 block 812 (3 transactions) 9f3c...`, escaped."""
    stamp = time.strftime("%H:%M:%S", time.localtime(event.get("time", time.time())))
    kind = event.get("event", "?")
    if kind == "block":
        text = (f"block {event['height']} round {event['round']} "
                f"({counted(event['transactions'], 'transaction')}) {event['hash'][:16]}")
    elif kind == "state":
        text = f"this node: {event['state']} at height {event['height']}" + (
            f" ({event['reason']})" if event.get("reason") else "")
    elif kind == "reward":
        amount = event["amount"]
        text = f"reward: block {event['height']} paid this node {format_coins(amount)} {coin_word(amount)}"
    elif kind == "proof_accepted":
        signed = time.strftime("%H:%M:%S", time.localtime(event["timestamp"]))
        text = f"uptime proof of {signed} accepted by {event['by']}"
    elif kind == "proof_refused":
        text = f"uptime proof refused by {event['by']}: {event['reason']}"
    elif kind == "credit_low":
        text = f"this node: downtime {event['reason']}"
    else:
        text = kind.replace("_", " ") + ": " + ", ".join(
            f"{k} {v}" for k, v in event.items() if k not in ("event", "time"))
    return _shown(f"{stamp} {text}")


def main(argv: list[str] | None = None) -> None:
    """Console entry point."""
    run_command(cli, "snode-cli", argv, interrupt_code=0)


if __name__ == "__main__":
    main()
