"""A client of a daemon's public OMQ port (`snode-cli --omq tcp://HOST:PORT --server-key HEX call
METHOD [JSON]`): one CurveZMQ DEALER with a fresh client key, one request, one answer."""

from __future__ import annotations

import json
from typing import Any, Final

import zmq
from zmq.utils import z85

from snode.common.text import fixed_hex

TIMEOUT: Final = 10.0


class OmqError(Exception):
    """The request could not be made, or the daemon refused it; one line."""


def parse_server_key(text: str | None) -> bytes:
    """The daemon's X25519 key (`service_node_x25519_pubkey` of get_service_node_key)."""
    if text is None:
        raise OmqError("--server-key: required with --omq (the daemon's service_node_x25519_pubkey, "
                       "64 hex characters, from get_service_node_key)")
    key = fixed_hex(text, 32)
    if key is None:
        raise OmqError(f"--server-key: '{text[:20]}' is not 64 hex characters")
    return key


def omq_call(url: str, server_key: bytes, method: str, params: Any, timeout: float = TIMEOUT) -> Any:
    """The result of `method` over the public OMQ port at `url` (tcp://HOST:PORT)."""
    if not url.startswith("tcp://"):
        raise OmqError(f"--omq: '{url}' is not a tcp://HOST:PORT address")
    public, secret = zmq.curve_keypair()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    try:
        sock.curve_serverkey = z85.encode(server_key)
        sock.curve_publickey, sock.curve_secretkey = public, secret
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(url)
        sock.send_multipart([method.encode(), json.dumps(params or {}).encode()])
        if not sock.poll(int(timeout * 1000)):
            raise OmqError(f"--omq: no answer from {url} within {timeout:g} s (wrong address or "
                           "--server-key, or the port is not enabled)")
        status, body = sock.recv_multipart()
    except zmq.ZMQError as err:
        raise OmqError(f"--omq: {url}: {err}") from None
    finally:
        sock.close(linger=0)
        ctx.term()
    answer = json.loads(body)
    if status != b"200":
        raise OmqError(f"{method}: {answer.get('error', answer)} (status {status.decode()})")
    return answer
