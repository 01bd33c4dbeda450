"""snode-devnet: a whole local network on one machine.

`up --nodes N` writes a genesis (fresh authority and faucet keys), starts N service-node daemons
on 127.0.100.x with their own data dirs under a base dir it prints, and creates a funded faucet
wallet (`faucet ADDRESS [AMOUNT]` pays from it). `status` shows a table, `down` stops exactly the
processes `up` started (by pid, after checking each pid still runs that data dir), `demo` runs
the operator flow against real daemons.

This module is the command line only: what it does to the network is `tools.devnet_network`,
the processes and their state file `tools.devnet_procs`, the demo `tools.devnet_demo`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from snode import __version__
from snode.common.entry import run_command
from snode.core.units import counted
from snode.tools.devnet_network import (
    FAUCET_AMOUNT,
    down,
    faucet,
    node_rows,
    restart,
    status_table,
    trusted_point,
    up,
)
from snode.tools.devnet_procs import (
    IP_PREFIX,
    Devnet,
    DevnetError,
    command_line,
    default_base_dir,
    is_our_process,
    stop_node,
)
from snode.tools.tables import make_console

BASE_DIR_HELP = "Where the devnet lives [./devnet, or $SNODE_DEVNET_DIR]; before or after the subcommand."


@click.group(context_settings={"help_option_names": ["--help", "-h"]})
@click.version_option(__version__, "--version", prog_name="snode-devnet", message="%(prog)s v%(version)s")
@click.option("--base-dir", type=click.Path(file_okay=False, path_type=Path), help=BASE_DIR_HELP)
@click.pass_context
def cli(ctx: click.Context, base_dir: Path | None) -> None:
    """snode-devnet: a local service-node network on loopback (127.0.100.x)."""
    ctx.obj = (base_dir or default_base_dir()).resolve()
    ctx.meta["explicit_base_dir"] = base_dir is not None


def _late_base_dir(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    """`--base-dir` given after the subcommand (`snode-devnet down --base-dir X`); given on both
    sides, the two must name the same dir (a `down` must never guess which devnet was meant)."""
    if value is None:
        return
    late = value.resolve()
    if ctx.meta.get("explicit_base_dir") and late != ctx.obj:
        raise DevnetError(f"--base-dir given twice, as {ctx.obj} and as {late}; give it once")
    ctx.obj = late
    ctx.meta["explicit_base_dir"] = True


base_dir_option = click.option(
    "--base-dir", "late_base_dir", type=click.Path(file_okay=False, path_type=Path), expose_value=False,
    callback=_late_base_dir, help=BASE_DIR_HELP,
)
"""Every subcommand takes --base-dir too, so the option works on either side of it."""


@cli.command("up")
@base_dir_option
@click.option("--nodes", "count", default=3, show_default=True, help="Service-node daemons to start.")
@click.option("--register", is_flag=True,
              help="Register every node from an operator wallet funded by the genesis.")
@click.option("--ip-prefix", default=IP_PREFIX, show_default=True,
              help="The authority listens on <prefix>1, node i on <prefix><i+1> (or set SNODE_DEVNET_IP_PREFIX).")
@click.option("--test-fork", "test_forks", multiple=True, metavar="NAME@HEIGHT",
              help="Schedule fork NAME at HEIGHT on every daemon and wallet of the devnet (repeatable, in order).")
@click.pass_obj
def up_cmd(base_dir: Path, count: int, register: bool, ip_prefix: str, test_forks: tuple[str, ...]) -> None:
    """Write a genesis, start the authority and the service-node daemons and a funded faucet
    wallet (and register the nodes)."""
    devnet = up(base_dir, count, ip_prefix, register=count if register else 0, say=click.echo,
                test_forks=test_forks)
    click.echo(f"devnet of {counted(count, 'service node')} and the authority running in {base_dir}")
    click.echo(f"faucet wallet: {devnet.faucet_dir / 'faucet.wallet'} (password in faucet.password)")
    for n in devnet.nodes:
        click.echo(f"  {n.name}: pid {n.pid}, admin RPC {n.rpc_url}, data dir {n.data_dir}")
    if devnet.test_forks:
        flags = " ".join(f"--test-fork={f}" for f in devnet.test_forks)
        click.echo(f"forks scheduled: {flags} (give a wallet or snoded of your own the same)")
    click.echo(f"stop it with: {command_line(base_dir, 'down')}")


@cli.command()
@base_dir_option
@click.option("--json", "as_json", is_flag=True, help="One JSON array of the processes.")
@click.pass_obj
def status(base_dir: Path, as_json: bool) -> None:
    """The processes: name, role, address, status, height, proof age, pid (--json adds each
    service node's key, sn_pubkey)."""
    devnet = Devnet.load(base_dir)
    if as_json:
        click.echo(json.dumps([{k: v for k, v in row.items() if k != "proof"} for row in node_rows(devnet)]))
    else:
        make_console().print(status_table(devnet))


@cli.command("stop")
@base_dir_option
@click.argument("name")
@click.pass_obj
def stop_cmd(base_dir: Path, name: str) -> None:
    """Stop one process by its pid (SIGTERM; SIGKILL if it does not stop)."""
    devnet = Devnet.load(base_dir)
    entry = devnet.entry(name)
    if not stop_node(entry):
        raise DevnetError(f"{name} is not running")
    click.echo(f"stopped {name} (pid {entry.pid})")


@cli.command("start")
@base_dir_option
@click.argument("name")
@click.pass_obj
def start_cmd(base_dir: Path, name: str) -> None:
    """Start a stopped process again on its data dir."""
    devnet = Devnet.load(base_dir)
    entry = devnet.entry(name)
    if is_our_process(entry):
        raise DevnetError(f"{name} is already running (pid {entry.pid})")
    restart(devnet, entry)
    click.echo(f"started {name} (pid {entry.pid}), admin RPC {entry.rpc_url}")


@cli.command("trusted-point")
@base_dir_option
@click.pass_obj
def trusted_point_cmd(base_dir: Path) -> None:
    """HEIGHT:HASH of the newest final snapshot height, for a new node's --trusted-checkpoint
    (its daemons write snapshots as service nodes do)."""
    click.echo(trusted_point(Devnet.load(base_dir)))


@cli.command("faucet")
@base_dir_option
@click.argument("address")
@click.argument("amount", default=str(FAUCET_AMOUNT))
@click.pass_obj
def faucet_cmd(base_dir: Path, address: str, amount: str) -> None:
    """Pay AMOUNT coins (default 1000, decimals allowed) from the devnet's faucet wallet to
    ADDRESS; they unlock 10 blocks after the block that mines them."""
    tx_id = faucet(Devnet.load(base_dir), address, amount)
    click.echo(f"sent {amount} coins to {address}: transaction {tx_id}")


@cli.command("down")
@base_dir_option
@click.pass_obj
def down_cmd(base_dir: Path) -> None:
    """Stop exactly the processes 'up' started; their data dirs and logs stay until the next 'up'."""
    devnet = Devnet.load(base_dir)
    click.echo(f"stopped {down(devnet)} of {counted(len(devnet.nodes), 'daemon')} in {base_dir}; "
               "their data dirs stay for reading (the next 'up' there replaces them)")


@cli.command()
@base_dir_option
@click.option("--keep", is_flag=True, help="Leave the devnet running at the end.")
@click.pass_context
def demo(ctx: click.Context, keep: bool) -> None:
    """The operator flow against real daemons, with a live table (a fresh temporary base dir
    unless --base-dir is given)."""
    from snode.tools.devnet_demo import run_demo

    sys.exit(run_demo(ctx.obj if ctx.meta.get("explicit_base_dir") else None, keep=keep))


def main(argv: list[str] | None = None) -> None:
    run_command(cli, "snode-devnet", argv)


if __name__ == "__main__":
    main()
