"""snoded as an operator starts it: every flag form, every bad value (one line naming the option,
exit 1, data dir untouched), the data-dir lock, the SN key's life across restarts and SIGKILL,
console commands and graceful signals.

Start-up errors run `snoded` to completion with its output captured (`run_snoded`); running
daemons are `nodes` of the framework, or started with pipes where a test types at the console.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from contextlib import contextmanager

import pytest

from snode.core.transactions import Transfer, TxOut
from snode.devchain import key_from_label
from snode.params import COIN
from tests.functional.framework import (
    assert_equal,
    narrator,
    next_loopback_ip,
    run_snoded,
    scaled,
    send_spend,
    wait_until,
)
from tests.functional.sn_helpers import SOLO, fund_and_unlock, register

log = narrator(__name__)
PAYEE = key_from_label("mempool payee")


def test_version_and_help():
    log.info("--version prints the version; --help names every flag")
    out = run_snoded(["--version"])
    assert_equal((out.returncode, out.stdout.strip()), (0, "snoded v0.2.0 (peer protocol 5; forks v1, v2)"))
    out = run_snoded(["--help"])
    assert out.returncode == 0
    for flag in ("--service-node", "--data-dir", "--p2p-bind-ip", "--p2p-bind-port", "--rpc-admin",
                 "--service-node-public-ip", "--quorumnet-port", "--add-priority-node",
                 "--log-level", "--non-interactive", "--testnet", "--devnet", "--regtest", "--genesis"):
        assert flag in out.stdout, flag


def _bad(tmp_path, args, option, rule):
    """snoded args must exit 1 with one stderr line naming option and rule, making no data dir."""
    data_dir = tmp_path / "dd"
    out = run_snoded([f"--data-dir={data_dir}", "--non-interactive", *args])
    assert_equal(out.returncode, 1, f"exit code for {args}: {out.stderr}")
    lines = out.stderr.strip().splitlines()
    assert_equal(len(lines), 1, f"stderr for {args}")
    assert option in lines[0] and rule in lines[0], lines[0]
    assert "Traceback" not in out.stderr
    assert not data_dir.exists(), "a refused start must leave the data dir as it was"


@pytest.mark.parametrize("args, option, rule", [
    (["--regtest", "--p2p-bind-ip=1.2.3"], "--p2p-bind-ip", "not an IP address"),
    (["--regtest", "--p2p-bind-port", "70000"], "--p2p-bind-port", "1 to 65535"),
    (["--regtest", "--p2p-bind-port=http"], "--p2p-bind-port", "not a port number"),
    (["--regtest", "--rpc-admin=127.0.0.1"], "--rpc-admin", "<ip>:<port>"),
    (["--regtest", "--rpc-admin", "localhost:9231"], "--rpc-admin", "not an IP address"),
    (["--regtest", "--quorumnet-port=0"], "--quorumnet-port", "1 to 65535"),
    (["--regtest", "--log-level=9"], "--log-level", "0 to 4"),
    (["--regtest", "--add-priority-node=seed"], "--add-priority-node", "<ip>:<port>"),
    (["--service-node"], "--service-node-public-ip", "required"),
    (["--service-node", "--service-node-public-ip=10.1.2.3"], "--service-node-public-ip", "not a public address"),
    (["--testnet", "--service-node", "--service-node-public-ip", "127.0.0.1"], "--service-node-public-ip",
     "not a public address"),
    (["--service-node", "--service-node-public-ip=300.1.1.1"], "--service-node-public-ip", "not an IP address"),
    (["--regtest", "--genesis=/nonexistent/genesis.json"], "--genesis", "not a readable file"),
    (["--regtest", "--no-such-flag"], "--no-such-flag", "No such option"),
])
def test_bad_values(tmp_path, args, option, rule):
    log.info("Start with %s: refused in one line naming %s", " ".join(args), option)
    _bad(tmp_path, args, option, rule)


def test_port_in_use(tmp_path):
    ip = next_loopback_ip()
    with socket.socket() as busy:
        busy.bind((ip, 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        log.info("Start with the RPC port taken by another socket: refused naming --rpc-admin")
        _bad(tmp_path, ["--regtest", f"--rpc-admin={ip}:{port}"], "--rpc-admin", "already in use")
        log.info("Start with the P2P port taken: refused naming --p2p-bind")
        _bad(tmp_path, ["--regtest", f"--rpc-admin={ip}:{port + 1 if port < 65535 else port - 1}",
                        f"--p2p-bind-ip={ip}", f"--p2p-bind-port={port}"], "--p2p-bind", "already in use")


def test_unusable_data_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    log.info("Start with a data dir below a file: refused in one line, the file untouched")
    ip = next_loopback_ip()
    out = run_snoded(["--regtest", "--non-interactive", f"--data-dir={blocker}/sub",
                      f"--rpc-admin={ip}:38091", f"--p2p-bind-ip={ip}"])
    assert_equal(out.returncode, 1)
    assert "--data-dir" in out.stderr and "not a directory" in out.stderr, out.stderr
    assert_equal(blocker.read_text(), "not a directory")


def test_both_flag_forms_and_key_survives_restart_and_sigkill(nodes):
    log.info("Start a service node with flags in both forms: its key file is private")
    node = nodes.add(extra_args=["--service-node"], start=False)
    node.extra_args = ["--service-node", "--log-level", "3"]  # `--opt value` form beside `--opt=value`
    node.start()
    key = node.get_service_node_key()["service_node_pubkey"]
    key_file = node.data_dir / "key"
    assert_equal(stat.S_IMODE(key_file.stat().st_mode), 0o600)
    log.info("Mine 7 blocks and restart: same key, same height")
    node.generate_blocks(blocks=7)
    assert_equal(node.stop(), 0)
    node.start()
    assert_equal(node.get_service_node_key()["service_node_pubkey"], key)
    assert_equal(node.get_info()["height"], 7)
    log.info("Mine 3 more and SIGKILL it, then start again: same key, every block kept")
    node.generate_blocks(blocks=3)
    node.kill()
    node.start()
    assert_equal(node.get_service_node_key()["service_node_pubkey"], key)
    assert_equal(node.get_info()["height"], 10)
    assert (node.data_dir / "genesis.json").is_file() and (node.data_dir / "chain.sqlite3").is_file()


def test_a_clean_restart_keeps_the_transactions_waiting_for_a_block(nodes):
    node = nodes.add()
    log.info("Fund two keys, then each pays the other: two transactions wait for a block; stop cleanly")
    other = key_from_label("mempool other")
    fund_and_unlock(node, {PAYEE.public: 50 * COIN, other.public: 50 * COIN})
    waiting = sorted([send_spend(node, PAYEE, [TxOut(other.public, 5 * COIN)], Transfer()),
                      send_spend(node, other, [TxOut(PAYEE.public, 7 * COIN)], Transfer())])
    assert_equal(sorted(t["txid"] for t in node.get_mempool()["transactions"]), waiting)
    assert_equal(node.stop(), 0)
    log.info("Start it again: both wait in the mempool, and the next block takes them")
    node.start()
    assert_equal(sorted(t["txid"] for t in node.get_mempool()["transactions"]), waiting)
    block = node.get_block(hash=node.generate_blocks(blocks=1)["blocks"][0])
    assert set(waiting) <= set(block["tx_ids"])


def test_second_daemon_on_same_data_dir_refused(nodes):
    first = nodes.add()
    log.info("Start a second daemon on a running daemon's data dir: refused, naming the first's pid")
    ip = next_loopback_ip()
    out = run_snoded(["--regtest", "--non-interactive", f"--data-dir={first.data_dir}",
                      f"--rpc-admin={ip}:38091", f"--p2p-bind-ip={ip}"])
    assert_equal(out.returncode, 1)
    assert "in use by another snoded" in out.stderr and str(first.process.pid) in out.stderr, out.stderr
    assert_equal(first.get_info()["height"], 0)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_gracefully(nodes, sig):
    node = nodes.add()
    log.info("Send %s: the daemon stops with status 0 and says so", sig.name)
    node.process.send_signal(sig)
    assert_equal(node.process.wait(scaled(20)), 0)
    assert "stopped" in node.stderr_text()


@contextmanager
def piped_daemon(tmp_path, *extra):
    """snoded with stdin and stdout as pipes; killed by its pid and its pipes closed at the end."""
    ip = next_loopback_ip()
    args = [sys.executable, "-m", "snode.app.daemon", "--regtest", f"--data-dir={tmp_path / 'dd'}",
            f"--rpc-admin={ip}:38091", f"--p2p-bind-ip={ip}", *extra]
    with subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True) as proc:
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_console_commands(tmp_path):
    with piped_daemon(tmp_path, "--service-node") as proc:
        log.info("Start with a console: it prints the status line")
        assert_equal(proc.stdout.readline().strip(), "v0.2.0; Height: 0, SN: not registered, proof: never")
        log.info("Type status, print_sn_key, a bogus command and exit: each answered, then exit 0")
        proc.stdin.write("status\nprint_sn_key\nbogus\nexit\n")
        proc.stdin.flush()
        assert_equal(proc.stdout.readline().strip(), "v0.2.0; Height: 0, SN: not registered, proof: never")
        key = proc.stdout.readline().strip()
        assert len(key) == 64 and bytes.fromhex(key)
        assert "unknown command 'bogus'" in proc.stdout.readline()
        assert_equal(proc.wait(scaled(20)), 0)


def test_non_interactive_never_reads_stdin(tmp_path):
    """With --non-interactive an `exit` on stdin is ignored: only a signal stops the daemon."""
    with piped_daemon(tmp_path, "--non-interactive") as proc:
        proc.stdout.readline()
        log.info("Type exit: the daemon is still running 1.5 s later")
        proc.stdin.write("exit\n")
        proc.stdin.flush()
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(scaled(1.5))
        log.info("Send SIGTERM: it stops with status 0")
        proc.send_signal(signal.SIGTERM)
        assert_equal(proc.wait(scaled(20)), 0)


def test_devnet_authority_produces_blocks(nodes, tmp_path):
    """On devnet a node holding the genesis authority key produces a block every block time."""
    from snode.core.address import encode_address
    from snode.core.crypto import SigningKey
    from snode.core.genesis import GenesisDoc, GenesisOutput, encode_genesis
    from snode.params import DEVNET

    log.info("Write a devnet genesis naming a fresh authority key")
    authority = SigningKey(os.urandom(32))
    wallet = SigningKey(os.urandom(32))
    genesis = tmp_path / "genesis.json"
    genesis.write_bytes(encode_genesis(GenesisDoc(
        network="devnet", timestamp=1_767_225_600, authorities=[authority.public.hex()],
        outputs=[GenesisOutput(encode_address(DEVNET.address_prefix, wallet.public), 10**15)],
    )))
    log.info("Start a node holding that key and one without: only the first produces blocks")
    producer = nodes.add(network="devnet", extra_args=[f"--genesis={genesis}"], start=False)
    producer.data_dir.mkdir(parents=True)
    (producer.data_dir / "authority_key").write_text(authority.seed.hex() + "\n")
    (producer.data_dir / "authority_key").chmod(0o600)
    producer.start()
    follower = nodes.add(network="devnet", extra_args=[f"--genesis={genesis}"])
    wait_until(lambda: producer.get_info()["height"] >= 2, timeout=15, what="two devnet blocks")
    assert_equal(follower.get_info()["height"], 0)  # no authority key, no blocks (and no P2P yet)
    block = producer.get_block(height=1)
    assert_equal((block["producer"], block["producer_key"]), ("authority", authority.public.hex()))
    assert_equal((block["round"], block["validators"], block["validator_count"]), (0, [], 0))
    info = producer.get_info()
    assert_equal((info["block_production"], info["immutable_height"]), ("authority", 0))


@pytest.mark.parametrize("args, option, rule", [
    (["--regtest", "--testnet"], "--testnet", "at most one network flag"),
    (["--regtest", "--data-dir="], "--data-dir", "empty"),
    (["--regtest", "--rpc-admin=127.0.0.1:38090", "--p2p-bind-port=38090"], "--p2p-bind-port",
     "also the --rpc-admin port"),
])
def test_more_bad_values(tmp_path, args, option, rule):
    log.info("Start with %s: refused in one line naming %s", " ".join(args), option)
    out = run_snoded([*args, "--non-interactive"])
    assert_equal(out.returncode, 1, out.stderr)
    assert option in out.stderr and rule in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_uncreatable_data_dir_is_one_line(tmp_path):
    log.info("Start with a data dir under /proc: refused in one line")
    ip = next_loopback_ip()
    out = run_snoded(["--regtest", "--non-interactive", "--data-dir=/proc/snode-test",
                      f"--rpc-admin={ip}:38091", f"--p2p-bind-ip={ip}"])
    assert_equal(out.returncode, 1)
    assert out.stderr.startswith("snoded: --data-dir: cannot use /proc/snode-test"), out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("stdin", ["file", "devnull", "closed pipe"])
def test_console_is_off_when_stdin_is_not_a_console(tmp_path, stdin):
    """Started like `snoded ... < file`, `< /dev/null` or from a script whose pipe closes,
    without --non-interactive: the daemon runs on (an `exit` in a file is not a command) and
    stops on SIGTERM."""
    log.info("Start with stdin from %s and no --non-interactive", stdin)
    ip = next_loopback_ip()
    commands = tmp_path / "commands"
    commands.write_text("exit\n")
    pipes = {"devnull": subprocess.DEVNULL, "closed pipe": subprocess.PIPE}
    source = open(commands) if stdin == "file" else pipes[stdin]
    args = [sys.executable, "-m", "snode.app.daemon", "--regtest", f"--data-dir={tmp_path / 'dd'}",
            f"--rpc-admin={ip}:38091", f"--p2p-bind-ip={ip}"]
    try:
        with subprocess.Popen(args, stdin=source, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as proc:
            assert proc.stdout is not None
            try:
                if stdin == "closed pipe":
                    assert proc.stdin is not None
                    proc.stdin.close()
                assert proc.stdout.readline().startswith("v0.2.0; Height: 0")
                log.info("It is still running 1.5 s later; SIGTERM stops it with status 0")
                with pytest.raises(subprocess.TimeoutExpired):
                    proc.wait(scaled(1.5))
                proc.send_signal(signal.SIGTERM)
                assert_equal(proc.wait(scaled(20)), 0)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    finally:
        if not isinstance(source, int):  # the file, not a subprocess constant
            source.close()


def test_registered_key_without_service_node_flag_warns(nodes):
    log.info("Register a service node's key and mine the registration")
    node = nodes.add(extra_args=["--service-node"])
    op = key_from_label("forgetful op")
    fund_and_unlock(node, {op.public: SOLO + COIN})
    register(node, node, op, SOLO)
    node.generate_blocks(blocks=1)
    log.info("Restart it without --service-node: it warns that its key is registered")
    node.stop()
    node.extra_args = []
    node.start()
    wait_until(lambda: "is registered, but snoded runs without --service-node" in node.stderr_text(),
               what="the warning")
