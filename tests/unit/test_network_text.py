"""Network text is data (DESIGN.md section 11): control characters, terminal escapes (OSC 52
clipboard writes, CSI cursor moves), NUL, DEL, C1 controls and bidi overrides fed through
`common.text.printable` and through every sink that shows text a peer may have written: the log
formatter, the sd_notify message builder, `--notify`'s environment, the status line, /readyz,
get_peers, and snode-cli's `status` and `watch` printers. Each must come out as one line of
visible characters that says what was there."""

from __future__ import annotations

import io
import logging
import socket
from typing import Any

import pytest
from click.testing import CliRunner

from snode.api.types import InfoResult
from snode.app.systemd import notify, status_message
from snode.common.logs import EscapingFormatter
from snode.common.text import printable
from snode.rpc.health import unmet_conditions
from snode.services.notify import event_environment
from snode.tools import cli
from tests.unit.conftest import service_node_daemon

OSC52 = "\x1b]52;c;aGVsbG8=\x07"
HOSTILE = ("evil\nSTOPPING=1\r\n" + OSC52 + "\x1b[2J\x1b[1A\x00\x7f\x9b31m\x85 \u202egnp.exe\u200b"
           "\u2028\U000e0041 end")
"""A reason as an attacker writes it: a forged sd_notify field and line, a clipboard write, a
screen clear and cursor move, NUL, DEL, C1 CSI and NEL, a bidi override, zero-width and line
separators, a tag character."""


def _plain(text: str) -> None:
    """One line of printable characters: no control, format or separator code point survives."""
    assert text.isprintable(), repr(text)
    assert "\n" not in text and "\x1b" not in text and "\u202e" not in text


# --- the function ------------------------------------------------------------------------------

@pytest.mark.parametrize("char, shown", [
    ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\x1b", "\\x1b"), ("\x00", "\\x00"), ("\x07", "\\x07"),
    ("\x7f", "\\x7f"), ("\x9b", "\\x9b"), ("\x85", "\\x85"), ("\xa0", "\\xa0"), ("\u202e", "\\u202e"),
    ("\u2066", "\\u2066"), ("\u200b", "\\u200b"), ("\u2028", "\\u2028"), ("\ufeff", "\\ufeff"),
    ("\ud800", "\\ud800"), ("\ue000", "\\ue000"), ("\U000e0041", "\\U000e0041"),
])
def test_each_unprintable_character_becomes_its_escape(char: str, shown: str) -> None:
    assert printable(f"a{char}b") == f"a{shown}b"


def test_printable_text_is_kept_as_it_is() -> None:
    for text in ("snoded/0.1.0", "déclaré 中文 ключ", "C:\\path with \\n in it", "", " "):
        assert printable(text) == text


def test_the_whole_attack_is_one_visible_line_that_says_what_was_sent() -> None:
    shown = printable(HOSTILE)
    _plain(shown)
    assert shown.startswith("evil\\nSTOPPING=1\\r\\n\\x1b]52;c;aGVsbG8=\\x07\\x1b[2J")
    assert printable(shown) == shown, "escaping twice changes nothing"


def test_the_length_is_bounded_and_never_cuts_an_escape() -> None:
    assert printable("a" * 10_000, 50) == "a" * 47 + "..."
    assert len(printable("\x1b" * 1_000)) == 299  # 74 whole escapes and the ellipsis
    cut = printable("ab" + "\x1b" * 10, 12)
    assert cut == "ab\\x1b...", cut
    assert printable("abcdefghij", 10) == "abcdefghij", "a text that fits keeps its last characters"
    assert printable("ab\ncd", 6) == "ab\\ncd"


# --- the sinks ---------------------------------------------------------------------------------

def test_the_log_formatter_writes_one_escaped_line_per_message() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(EscapingFormatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("test.network_text")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("uptime proof rejected by %s: %s", "127.0.0.9:9230", HOSTILE)
        logger.warning(HOSTILE)  # a message that is itself network text
        try:
            raise ValueError(HOSTILE)
        except ValueError:
            logger.exception("error serving peer %s", "127.0.0.9:9230")
    finally:
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert lines[0] == f"WARNING test.network_text: uptime proof rejected by 127.0.0.9:9230: {printable(HOSTILE)}"
    assert lines[1] == f"WARNING test.network_text: {printable(HOSTILE)}"
    for line in lines:
        assert line.isprintable(), repr(line)
    assert not any(line.startswith("STOPPING") for line in lines)
    assert lines[-1] == f"ValueError: {printable(HOSTILE)}"


def test_the_sd_notify_message_has_one_status_field(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    message = status_message(f"v0.1.0; Height: 3, SN: active, refused: {HOSTILE}", ready=True)
    fields = message.split("\n")
    assert [f.split("=", 1)[0] for f in fields] == ["READY", "STATUS"]
    _plain(fields[1])
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        assert notify(status_message(HOSTILE))
        server.settimeout(5)
        datagram = server.recv(4096).decode()
    assert b"\n" not in datagram.encode() and "STOPPING=1" in datagram  # as text inside STATUS, not a field
    assert datagram.startswith("STATUS=evil\\nSTOPPING=1")


def test_the_notify_environment_holds_escaped_values() -> None:
    env = event_environment({"event": "proof_refused", "reason": HOSTILE, "state": OSC52, "height": 7})
    assert env["SNODE_REASON"] == printable(HOSTILE)
    assert env["SNODE_STATE"] == "\\x1b]52;c;aGVsbG8=\\x07"
    assert env["SNODE_HEIGHT"] == "7"
    for value in env.values():
        _plain(value)


def test_the_status_line_and_readyz_show_escaped_words() -> None:
    # Since protocol 2 a refusal's words are our own; the sinks escape whatever they are given
    # all the same, so that a future field with a peer's text cannot slip through.
    node = service_node_daemon("text sn")
    node.own_proof.refused_reason = HOSTILE
    line = node.status_line(node.now())
    _plain(line)
    assert line.endswith(f", refused: {printable(HOSTILE)}")
    unmet = unmet_conditions(node, node.now(), peer_count=1)["unmet"]
    assert any(printable(HOSTILE) in u for u in unmet)
    for condition in unmet:
        _plain(condition)


def test_the_cli_status_and_watch_printers_escape_what_the_daemon_says(monkeypatch: pytest.MonkeyPatch) -> None:
    info = InfoResult(height=3, target_height=0, status_line=f"v0.1.0; Height: 3, refused: {HOSTILE}",
                      network="regtest" + OSC52, version="0.1.0", top_block_hash="00" * 32,
                      genesis_hash="00" * 32, mempool_size=0, service_node=True, service_node_count=1,
                      peer_count=1, last_uptime_proof_rejection=f"uptime proof rejected by x: {HOSTILE}",
                      immutable_height=0, block_production="authority")
    monkeypatch.setattr(cli, "_call", lambda ctx, method, params, result_type: info)
    result = CliRunner().invoke(cli.cli, ["status"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 3, lines
    for line in lines:
        _plain(line)
    for event in ({"event": "proof_refused", "by": OSC52, "reason": HOSTILE, "time": 0},
                  {"event": "peer_banned", "ip": "127.0.0.9", "reason": HOSTILE, "seconds": 600, "time": 0},
                  {"event": HOSTILE, "time": 0}):
        _plain(cli.event_line(event))
