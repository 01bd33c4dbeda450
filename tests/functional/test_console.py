"""snoded's console in a real terminal (a pexpect pty) and from a pipe: print_sn_status before
and after a registration, the prepare_registration wizard (each answer checked by the admin RPC's
own registration rules, a refused answer asked again, `cancel` leaving), its command pasted into
a registration transaction, command completion with Tab, and history with the up arrow and in
`<data-dir>/console_history`.

The daemon is a regtest service node started in a pty (so its console is the prompt_toolkit one)
or with pipes; the test types what an operator types, reads what the terminal shows, and drives
the chain over the admin RPC.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pexpect

from snode.core.address import encode_address
from snode.core.registration import parse_command
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST
from tests.functional.framework import TestNode, assert_equal, narrator, scaled, send_spend
from tests.functional.sn_helpers import SOLO, fund_and_unlock

PROMPT = r"\[snoded regtest\]:"

log = narrator(__name__)


def _address(label: str) -> str:
    return encode_address(REGTEST.address_prefix, key_from_label(label).public)


def _spawn(node: TestNode) -> pexpect.spawn:
    """node's daemon in a terminal, with its console."""
    args = [a for a in node.args() if a != "--non-interactive"][1:]
    env = dict(os.environ, PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm")
    return pexpect.spawn(sys.executable, args, env=env, encoding="utf-8", timeout=scaled(30), dimensions=(50, 250))


def _wizard_line(child: pexpect.spawn) -> str:
    child.expect(r"(register_service_node [^\r\n]+)\r?\n")
    return child.match.group(1)


def test_console_in_a_terminal(tmp_path):
    node = TestNode(0, tmp_path, extra_args=["--service-node"])
    operator, other = key_from_label("console operator"), _address("console contributor")
    child = _spawn(node)
    try:
        child.expect("Tab completes")
        child.expect(PROMPT)
        node.wait_for_rpc()
        pubkey = node.get_service_node_key()["service_node_pubkey"]
        log.info("print_sn_st<Tab> completes the command; before a registration it says so")
        child.send("print_sn_st\t")
        child.expect("atus")  # the completion of the word typed so far
        child.send("\r")
        child.expect(f"service node {pubkey}: not registered")
        assert "unknown command" not in child.before
        child.expect(PROMPT)

        log.info("prepare_registration: a bad address and a too small amount are refused in one line "
                 "each and asked again; 50%%, a 5%% fee and a reserved contributor make a command")
        child.sendline("prepare_registration")
        child.expect("Operator wallet address:")
        child.sendline("snr1nonsense")
        child.expect("operator address: ")
        child.expect("Operator wallet address:")
        child.sendline(encode_address(REGTEST.address_prefix, operator.public))
        child.expect(r"its amount, in coins or as a share of 200000 \(50%\) \[200000, the whole stake\]:")
        child.sendline("5")
        child.expect(r"Failed to make registration command: operator contribution 5000000000 atomic units \(5 coins\) "
                     "is below the pool minimum")
        child.expect("its amount")
        child.sendline("50%")
        child.expect(r"Operator fee, percent of the rewards, 0 to 10 \[0\]:")
        child.sendline("5%")
        child.expect(r"Reserved contributor 1 address \(empty: no more\):")
        child.sendline(other)
        child.expect("its amount")
        child.sendline("60000")
        child.expect("Reserved contributor 2 address")
        child.sendline("")
        child.expect("Stakes reserved: 160000 of 200000 coins; operator fee 5%.")
        pool = parse_command(_wizard_line(child), REGTEST)
        assert_equal((pool.fee_ppm, [r.amount for r in pool.reservations], pool.sn_pubkey.hex()),
                     (50_000, [SOLO // 2, 60_000 * COIN], pubkey))
        child.expect(PROMPT)

        log.info("cancel, or Ctrl-C, at a question leaves the wizard and makes nothing")
        child.sendline("prepare_registration")
        child.expect("Operator wallet address:")
        child.sendline("cancel")
        child.expect("prepare_registration cancelled; nothing was made")
        child.expect(PROMPT)
        child.sendline("prepare_registration")
        child.expect("Operator wallet address:")
        child.send("\x03")
        child.expect("prepare_registration cancelled; nothing was made")
        child.expect(PROMPT)

        log.info("A solo registration (Enter takes the whole stake and no fee), paid as the wallet would")
        child.sendline("prepare_registration")
        child.expect("Operator wallet address:")
        child.sendline(encode_address(REGTEST.address_prefix, operator.public))
        child.expect("its amount")
        child.sendline("")
        child.expect("Operator fee")
        child.sendline("")
        solo = parse_command(_wizard_line(child), REGTEST)
        assert_equal([r.amount for r in solo.reservations], [SOLO])
        child.expect(PROMPT)
        fund_and_unlock(node, {operator.public: SOLO + COIN})
        send_spend(node, operator, [], solo)
        node.generate_blocks(blocks=1)

        log.info("print_sn_status now shows the record: status, stake, the operator, credit, proof")
        child.sendline("print_sn_status")
        child.expect(f"service node {pubkey}\r?\n")
        child.expect(r"  status: \w+")
        child.expect(r"stake: 200000 of 200000 coins; operator fee 0%; 1 contributor:")
        child.expect(f"operator    {encode_address(REGTEST.address_prefix, operator.public)} 200000 coins")
        child.expect("downtime credit: ")
        child.expect("last uptime proof: ")
        child.expect(PROMPT)
        child.sendline("prepare_registration")
        child.expect("this service node is already registered; print_sn_status shows its record")
        child.expect(PROMPT)

        log.info("The up arrow recalls the last command; the history file holds what was typed")
        child.send("\x1b[A")
        child.expect("prepare_registration")
        child.send("\x15")  # Ctrl-U: clear the recalled line
        history = node.data_dir / "console_history"
        assert_equal(stat.S_IMODE(history.stat().st_mode), 0o600)
        assert "+print_sn_status" in history.read_text() and "+prepare_registration" in history.read_text()
        log.info("Ctrl-C at the prompt stops the daemon with status 0, as the signal does without a console "
                 "(exit does too: the pipe test)")
        child.send("\x03")
        child.expect("stopped")
        child.expect(pexpect.EOF)
        child.close()
        assert_equal(child.exitstatus, 0)
    finally:
        node.rpc.close()
        if child.isalive():
            child.terminate(force=True)


@contextmanager
def _piped(tmp_path, *extra: str) -> Iterator[subprocess.Popen[str]]:
    """A regtest daemon whose console reads a pipe, past its first status line; stopped by its
    pid at the end."""
    node = TestNode(0, tmp_path, extra_args=list(extra))
    args = [a for a in node.args() if a != "--non-interactive"]
    with subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True) as proc:
        try:
            _read_line(proc)
            yield proc
        finally:
            node.rpc.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _type(proc: subprocess.Popen[str], text: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(text)
    proc.stdin.flush()


def _read_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline()


def test_console_from_a_pipe_without_a_service_node(tmp_path):
    log.info("A daemon that is no service node: both new commands say so in one line")
    with _piped(tmp_path) as proc:
        log.info("A line longer than the console reads (64 KiB) is ignored with a word; it reads on")
        _type(proc, "x" * 70_000 + "\nhelp\n")
        assert_equal(_read_line(proc).strip(), "console: a line over 64 KiB was ignored")
        rest = _read_line(proc)
        if rest.startswith("unknown command"):  # the part of the line after what was dropped
            assert rest.startswith("unknown command '" + "x" * 40 + "...'"), rest
            rest = _read_line(proc)
        assert rest.startswith("commands: status"), rest
        _type(proc, "print_sn_status\nprepare_registration\nhelp\nexit\n")
        assert_equal(_read_line(proc).strip(),
                     "this daemon is not a service node (start it with --service-node)")
        assert_equal(_read_line(proc).strip(), "Failed to make registration command: this daemon is "
                     "not a service node; start snoded with --service-node")
        assert_equal(_read_line(proc).strip(), "commands: status, print_sn_key, print_sn_status, "
                     "prepare_registration, help, exit")
        assert_equal(proc.wait(scaled(20)), 0)


def test_prepare_registration_from_a_pipe(tmp_path):
    """A script drives the wizard: each question is a line, each answer the next line of input."""
    operator = _address("piped operator")
    with _piped(tmp_path, "--service-node") as proc:
        _type(proc, f"prepare_registration\nsnr1bad\n{operator}\n50%\n2.5\n\n")
        lines = [_read_line(proc).rstrip("\n") for _ in range(10)]
        assert_equal([lines[0], lines[1], lines[3]], [
            "The registration of this service node, step by step ('cancel' or Ctrl-C leaves).",
            "Operator wallet address: ", "Operator wallet address: "])
        assert lines[2].startswith("  operator address: "), lines
        assert lines[4].startswith("  its amount, in coins or as a share of 200000 (50%)"), lines
        assert lines[5].startswith("Operator fee, percent of the rewards"), lines
        assert lines[6].startswith("Reserved contributor 1 address"), lines
        assert_equal(lines[7:9], ["Stakes reserved: 100000 of 200000 coins; operator fee 2.5%.",
                                  "Paste this line into snode-wallet (it is valid for about 14 days):"])
        reg = parse_command(lines[9], REGTEST)
        assert_equal((reg.fee_ppm, [r.amount for r in reg.reservations]), (25_000, [SOLO // 2]))
        _type(proc, "exit\n")
        assert_equal(proc.wait(scaled(20)), 0)
