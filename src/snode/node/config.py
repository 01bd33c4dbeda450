"""Command line -> one frozen Config. The flags only map onto it; every rule is checked here
so that a bad value is one line naming the option, before anything touches the data dir."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from snode.params import MAINNET, NETWORKS, NetworkParams

LOG_LEVELS = range(0, 5)


class ConfigError(Exception):
    """A start-up error: one line for the operator, exit code 1."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An IP address and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Config:
    """Everything the daemon needs to start."""

    params: NetworkParams
    data_dir: Path
    service_node: bool
    p2p_bind: Endpoint
    rpc_admin: Endpoint
    quorumnet_port: int
    public_ip: str | None
    priority_nodes: tuple[Endpoint, ...]
    log_level: int
    non_interactive: bool
    genesis_file: Path | None
    rpc_allowed_hosts: tuple[str, ...]


def default_data_dir(params: NetworkParams) -> Path:
    """~/.snode for mainnet, ~/.snode/<network> for the others."""
    base = Path(os.environ.get("SNODE_HOME", Path.home() / ".snode"))
    return base if params is MAINNET else base / params.name


def parse_ip(option: str, text: str) -> str:
    """A literal IPv4 or IPv6 address, or ConfigError naming the option."""
    try:
        return str(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        raise ConfigError(f"{option}: '{text}' is not an IP address (example: 127.0.0.1)") from None


def parse_port(option: str, text: str | int) -> int:
    """A TCP port 1..65535, or ConfigError naming the option."""
    value = str(text)
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise ConfigError(f"{option}: '{text}' is not a port number (1 to 65535)")
    return int(value)


def parse_endpoint(option: str, text: str, *, allow_names: bool = False) -> Endpoint:
    """`<ip>:<port>` (IPv6 as `[addr]:port`); with allow_names also `<hostname>:<port>`."""
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{option}: '{text}' is not of the form <ip>:<port>")
    if allow_names and not _looks_like_ip(host):
        if not _valid_hostname(host):
            raise ConfigError(f"{option}: '{host}' is not a valid host name or IP address")
        return Endpoint(host, parse_port(option, port))
    return Endpoint(parse_ip(option, host), parse_port(option, port))


def _looks_like_ip(host: str) -> bool:
    return host.startswith("[") or all(part.isdigit() for part in host.split("."))


def _valid_hostname(host: str) -> bool:
    labels = host.split(".")
    return len(host) <= 253 and all(
        0 < len(label) <= 63 and label.replace("-", "").isalnum() and label.isascii()
        and not label.startswith("-") for label in labels
    )


def is_public_ip(ip: str) -> bool:
    """False for loopback, private, link-local, unspecified and other non-routable addresses."""
    addr = ipaddress.ip_address(ip)
    return addr.is_global


def build_config(
    *, network: str, data_dir: str | None, service_node: bool, p2p_bind_ip: str | None,
    p2p_bind_port: str | None, rpc_admin: str | None, public_ip: str | None,
    quorumnet_port: str | None, priority_nodes: tuple[str, ...], log_level: str,
    non_interactive: bool, genesis: str | None, rpc_allow_hosts: tuple[str, ...] = (),
) -> Config:
    """Validate the flags' raw strings into a Config; ConfigError names the first bad option."""
    params = NETWORKS[network]
    if not log_level.isdigit() or int(log_level) not in LOG_LEVELS:
        raise ConfigError(f"--log-level: '{log_level}' is not a log level (0 to 4)")
    p2p_ip = parse_ip("--p2p-bind-ip", p2p_bind_ip) if p2p_bind_ip is not None else "0.0.0.0"
    p2p_port = parse_port("--p2p-bind-port", p2p_bind_port) if p2p_bind_port is not None else params.p2p_port
    rpc = (
        parse_endpoint("--rpc-admin", rpc_admin) if rpc_admin is not None
        else Endpoint("127.0.0.1", params.rpc_port)
    )
    qnet = parse_port("--quorumnet-port", quorumnet_port) if quorumnet_port is not None else params.quorumnet_port
    ip = parse_ip("--service-node-public-ip", public_ip) if public_ip is not None else None
    if service_node and ip is None:
        if not params.private_public_ip_allowed:
            raise ConfigError(
                "--service-node-public-ip: required with --service-node on "
                f"{params.name}; give the node's real public IP address"
            )
        # Peers see our P2P address, so that is what proofs must declare.
        bound = p2p_ip if p2p_ip not in ("0.0.0.0", "::") else rpc.host
        ip = bound if bound not in ("0.0.0.0", "::") else "127.0.0.1"
    if ip is not None and not params.private_public_ip_allowed and not is_public_ip(ip):
        raise ConfigError(
            f"--service-node-public-ip: {ip} is not a public address; {params.name} needs the "
            "node's real public IP, or uptime proofs fail"
        )
    nodes = tuple(parse_endpoint("--add-priority-node", n, allow_names=True) for n in priority_nodes)
    allowed = []
    for host in rpc_allow_hosts:
        if not _valid_hostname(host) and not _looks_like_ip(host):
            raise ConfigError(f"--rpc-allow-host: '{host}' is not a host name or IP address")
        allowed.append(host.lower())
    if data_dir is not None and not data_dir.strip():
        raise ConfigError("--data-dir: give a directory path (it is empty)")
    ports = {"--rpc-admin": (rpc.host, rpc.port), "--p2p-bind-port": (p2p_ip, p2p_port)}
    if service_node:
        ports["--quorumnet-port"] = (p2p_ip, qnet)
    seen: dict[int, str] = {}
    for option, (_, port) in ports.items():
        if port in seen:
            raise ConfigError(f"{option}: port {port} is also the {seen[port]} port; give each its own port")
        seen[port] = option
    genesis_path = Path(genesis) if genesis is not None else None
    if genesis_path is not None and not genesis_path.is_file():
        raise ConfigError(f"--genesis: {genesis} is not a readable file")
    return Config(
        params=params,
        data_dir=Path(data_dir).expanduser() if data_dir else default_data_dir(params),
        service_node=service_node, p2p_bind=Endpoint(p2p_ip, p2p_port), rpc_admin=rpc,
        quorumnet_port=qnet, public_ip=ip, priority_nodes=nodes, log_level=int(log_level),
        non_interactive=non_interactive, genesis_file=genesis_path,
        rpc_allowed_hosts=tuple(allowed),
    )
