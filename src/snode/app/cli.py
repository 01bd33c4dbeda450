"""snoded's command line: its flags and their help text, the one network flag, and the warnings
about flags that are valid but change nothing where they are given. The flags only map onto
`app.config.build_config`, which checks each value (a bad one is one line naming the flag); the
command hands the Config it builds to whoever runs the daemon (`app.daemon.main`)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import click

from snode import __version__
from snode.api.credentials import is_loopback
from snode.app.config import Config, ConfigError, build_config
from snode.common.network_flags import given_networks, network_flags
from snode.net.protocol import PROTOCOL_VERSION
from snode.params import KNOWN_FORKS

VERSION_LINE = f"%(prog)s v%(version)s (peer protocol {PROTOCOL_VERSION}; forks {', '.join(KNOWN_FORKS)})"
"""`snoded --version`: what a peer and a chain need of this build, besides its version (CHANGELOG.md:
a release whose blocks, transactions, proofs or peer protocol differ changes its version)."""

log = logging.getLogger("snoded")  # the daemon's own lines, beside app/daemon.py's


def snoded_command(start: Callable[[Config], None]) -> click.Command:
    """The `snoded` command: its flags, checked into one Config that `start` runs."""

    @click.command(context_settings={"help_option_names": ["--help", "-h"], "max_content_width": 100})
    @click.option("--service-node", is_flag=True, help="Run as a service node.")
    @click.option("--data-dir", metavar="PATH",
                  help="Data directory: keys, registration, chain [~/.snode, ~/.snode/<network>].")
    @click.option("--p2p-bind-ip", metavar="IP", help="P2P bind address [0.0.0.0].")
    @click.option("--p2p-bind-port", metavar="PORT", help="P2P port [9230].")
    @click.option("--rpc-admin", metavar="IP:PORT", help="Admin RPC bind [127.0.0.1:9231]; keep it on loopback.")
    @click.option("--rpc-login-file", metavar="FILE", help="Admin RPC login user:pass in FILE [off; SNODE_RPC_LOGIN].")
    @click.option("--rpc-login", hidden=True, help="Refused: a login on the command line is public.")
    @click.option("--rpc-no-login", is_flag=True,
                  help="On a bind that is not loopback, ask no login either (a container whose port "
                       "mapping is restricted to the host's loopback); off: the cookie is asked for.")
    @click.option("--rpc-allow-host", "rpc_allow_hosts", multiple=True, metavar="HOST",
                  help="Extra Host header value the admin RPC accepts (repeatable).")
    @click.option("--service-node-public-ip", "public_ip", metavar="IP", help="The node's real public IP.")
    @click.option("--quorumnet-port", metavar="PORT", help="SN-to-SN port [9232].")
    @click.option("--add-priority-node", "priority_nodes", multiple=True, metavar="HOST:PORT",
                  help="Peer to stay connected to (repeatable).")
    @click.option("--log-level", default="2", show_default=True, metavar="0-4", help="0 errors .. 4 trace.")
    @click.option("--omq-public", metavar="IP:PORT",
                  help="Serve the public read-only RPC over CurveZMQ there (off by default; port 9233 on "
                       "mainnet); needs --service-node.")
    @click.option("--skip-doppelganger-check", is_flag=True,
                  help="Send uptime proofs at once, without first listening two proof intervals for "
                       "another daemon running this service node's key.")
    @click.option("--notify", metavar="COMMAND",
                  help="Run COMMAND (no shell) for this node's own events: state changes, refused "
                       "proofs, rewards, low downtime credit, a fork this snoded does not know; the "
                       "event is in SNODE_EVENT, SNODE_STATE, SNODE_REASON, SNODE_HEIGHT, SNODE_PUBKEY, "
                       "SNODE_AMOUNT, SNODE_CREDIT.")
    @click.option("--non-interactive", is_flag=True, help="Never read console commands from stdin.")
    @network_flags
    @click.option("--genesis", metavar="FILE", help="Genesis document for this network.")
    @click.option("--test-fork", "test_forks", multiple=True, metavar="NAME@HEIGHT",
                  help="Devnet/regtest: schedule fork NAME at HEIGHT (repeatable, in order).")
    @click.option("--trusted-checkpoint", metavar="HEIGHT:HASH",
                  help="A block the chain must pass through: a node whose chain has another block at "
                       "HEIGHT refuses to start, and a sync refuses one.")
    @click.option("--snapshots/--no-snapshots", default=None,
                  help="Write snapshots of the state at final heights and serve them to new nodes "
                       "[on for a service node].")
    @click.option("--no-backfill", is_flag=True,
                  help="A node started from a snapshot never downloads the blocks below it: its history "
                       "starts at the snapshot.")
    @click.option("--assume-valid", metavar="HASH",
                  help="A sync skips the input signatures of this block's ancestors (0: check every one; "
                       "default: the release's block for the network, none yet).")
    @click.version_option(__version__, "--version", prog_name="snoded", message=VERSION_LINE)
    def cli(testnet: bool, devnet: bool, regtest: bool, **flags: object) -> None:
        """snoded: the snode service-node daemon (mainnet unless a network flag is given)."""
        chosen = given_networks(testnet, devnet, regtest)
        if len(chosen) > 1:
            raise ConfigError(f"--{chosen[0]} and --{chosen[1]}: give at most one network flag")
        # click hands the options over as `object`; build_config checks each one's value itself.
        start(build_config(network=chosen[0] if chosen else "mainnet", **flags))  # type: ignore[arg-type]

    return cli


def warn_about_flags(config: Config) -> None:
    """Log what the operator gave that does not do what it may seem to: a flag that changes
    nothing here, and a fault test's skewed clock."""
    if config.public_ip is not None and not config.service_node:
        log.warning("--service-node-public-ip is ignored without --service-node")
    if config.rpc_no_login and is_loopback(config.rpc_admin.host):
        log.warning("--rpc-no-login changes nothing on the loopback bind %s (it asks no login anyway)",
                    config.rpc_admin)
    if config.clock_offset:
        log.warning("SNODE_CLOCK_OFFSET: this daemon's clock runs %+.3f s from the machine's "
                    "(a fault test's skewed clock)", config.clock_offset)
