"""Endpoint parsing for every command: `<ip>:<port>`, `<host>:<port>`, `http://<ip>:<port>`.

One set of rules, so that `--rpc-admin`, `--add-priority-node`, `add_peer`, `--daemon-address`,
`snode-cli --rpc`, `--rpc-bind` and the JSON-RPC client accept and refuse the same things, with
the same messages.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


class ConfigError(Exception):
    """A start-up error: one line for the operator, exit code 1."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An IP address and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


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
    if allow_names and not looks_like_ip(host):
        if not valid_hostname(host):
            raise ConfigError(f"{option}: '{host}' is not a valid host name or IP address")
        return Endpoint(host, parse_port(option, port))
    return Endpoint(parse_ip(option, host), parse_port(option, port))


def parse_http_url(option: str, text: str) -> str:
    """An RPC address, `http://<host>:<port>` or `<host>:<port>` (a trailing `/` allowed), as
    `http://<host>:<port>`; ConfigError naming the option."""
    return f"http://{http_endpoint(option, text)}"


def http_endpoint(option: str, text: str) -> Endpoint:
    """The host (an IP or a host name) and port of an RPC address, as parse_http_url takes it."""
    scheme, sep, rest = text.strip().partition("://")
    if not sep:
        rest = scheme
    rest = rest.removesuffix("/")
    if (sep and scheme.lower() != "http") or "/" in rest or not rest.rpartition(":")[0]:
        raise ConfigError(f"{option}: '{text}' is not of the form http://<ip>:<port>")
    return parse_endpoint(option, rest, allow_names=True)


def looks_like_ip(host: str) -> bool:
    """True when host is written as an IP literal (digits and dots, or `[...]`)."""
    return host.startswith("[") or all(part.isdigit() for part in host.split("."))


def valid_hostname(host: str) -> bool:
    """True for a syntactically valid DNS host name."""
    labels = host.split(".")
    return len(host) <= 253 and all(
        0 < len(label) <= 63 and label.replace("-", "").isalnum() and label.isascii()
        and not label.startswith("-") for label in labels
    )


def ip_endpoint(text: str) -> Endpoint | None:
    """`<ip>:<port>` as an Endpoint, None if it is not one (addresses peers tell us about)."""
    try:
        return parse_endpoint("address", text)
    except ConfigError:
        return None
