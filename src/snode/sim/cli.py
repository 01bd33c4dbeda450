"""snode-sim: simulate N service nodes and C contributors over B service-node blocks.

    snode-sim --service-nodes 1000 --contributors 5000 --blocks 1000 --seed 1 --json

Prints the figures (`sim.report`): per-block CPU, memory, messages, failed rounds, reward
fairness. Progress goes to stderr; with --json stdout holds one JSON object and nothing else.
"""

from __future__ import annotations

import json
import sys

import click

from snode import __version__
from snode.common.entry import run_command
from snode.sim.config import SimConfig
from snode.sim.rounds import SimError
from snode.sim.world import World


def _partition(value: str | None) -> tuple[float, int, int] | None:
    if value is None:
        return None
    try:
        share, start, end = value.split(":")
        parsed = (float(share), int(start), int(end))
    except ValueError:
        raise click.BadParameter("give SHARE:FROM:TO, e.g. 0.25:100:200 (a quarter of the nodes cut "
                                 "off from block 100 to block 200)", param_hint="--partition") from None
    if not 0 < parsed[0] < 0.5 or not 0 <= parsed[1] < parsed[2]:
        raise click.BadParameter("SHARE must be above 0 and below 0.5, and FROM below TO",
                                 param_hint="--partition")
    return parsed


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="snode-sim", message="%(prog)s v%(version)s")
@click.option("--service-nodes", "service_nodes", type=click.IntRange(12, 100_000), default=1_000, show_default=True,
              help="Service nodes (at least 12, the active minimum).")
@click.option("--contributors", type=click.IntRange(12, 1_100_000), default=None,
              help="Contributors, operators included (default: 5 per node).")
@click.option("--blocks", type=click.IntRange(1, 1_000_000), default=1_000, show_default=True,
              help="Service-node blocks after every node is active.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of every random draw.")
@click.option("--latency-ms", "latency_ms", type=click.FloatRange(0, 60_000), default=50.0, show_default=True,
              help="Mean one-way message latency.")
@click.option("--loss", type=click.FloatRange(0, 0.5), default=0.0, show_default=True,
              help="Chance that a message is lost.")
@click.option("--outage-rate", "outage_rate", type=click.FloatRange(0, 0.01), default=0.00002, show_default=True,
              help="Chance per node per block of going down (for 2 to 40 blocks).")
@click.option("--unlock-share", "unlock_share", type=click.FloatRange(0, 1), default=0.01, show_default=True,
              help="Share of the nodes whose stakes are asked back in the first half.")
@click.option("--partition", default=None, metavar="SHARE:FROM:TO",
              help="Cut SHARE of the nodes off from block FROM to block TO.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(service_nodes: int, contributors: int | None, blocks: int, seed: int, latency_ms: float,
            loss: float, outage_rate: float, unlock_share: float, partition: str | None, as_json: bool) -> None:
    """Simulate a service-node network on the real core and node code."""
    config = SimConfig(
        service_nodes=service_nodes, contributors=contributors or service_nodes * 5, blocks=blocks,
        seed=seed, latency_ms=latency_ms, loss=loss, outage_rate=outage_rate,
        unlock_share=unlock_share, partition=_partition(partition),
    )
    try:
        world = World(config, progress=lambda text: click.echo(f"snode-sim: {text}", err=True))
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    result = world.run().result
    if as_json:
        click.echo(json.dumps(result))
        return
    width = max(len(k) for k in result)
    for key, value in result.items():
        click.echo(f"{key:<{width}}  {value}")


def main(argv: list[str] | None = None) -> None:
    run_command(command, "snode-sim", argv if argv is not None else sys.argv[1:], errors=(SimError,))


if __name__ == "__main__":
    main()
