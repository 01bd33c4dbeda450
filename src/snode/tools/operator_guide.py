"""`make docs`: docs/OPERATOR.md from docs/OPERATOR.md.in, with real output.

The guide's commands are run for real on a regtest network of this machine's loopback (a hub
holding the regtest authority key, two service-node daemons, wallets), and each `{{name}}` of the
template is replaced by the command and what it printed, so the guide never shows output that
the software no longer prints. Every process started here is stopped by its pid.
"""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from snode.api.client import RpcClient, RpcUnavailable
from snode.params import REGTEST_FAUCET_WORDS

ROOT = Path(__file__).resolve().parents[3]
TEMPLATE = ROOT / "docs" / "OPERATOR.md.in"
OUTPUT = ROOT / "docs" / "OPERATOR.md"
IPS = ("127.0.77.1", "127.0.77.2", "127.0.77.3")
GONE = "127.0.77.4"
"""Where no daemon listens: the fleet's unreachable node."""


class Capture:
    """The network, the wallets, and what each command printed."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.shots: dict[str, str] = {}
        self.daemons: list[subprocess.Popen[str]] = []

    # --- processes ------------------------------------------------------------------------------

    def daemon(self, ip: str, *extra: str) -> str:
        """Start snoded on `ip`; its first stdout line (the status line)."""
        args = [sys.executable, "-m", "snode.app.daemon", "--regtest", "--non-interactive",
                f"--data-dir={self.base / ip}", f"--rpc-admin={ip}:38091", f"--p2p-bind-ip={ip}", *extra]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, text=True)
        self.daemons.append(proc)
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        deadline = time.monotonic() + 30
        while not self._serving(ip):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"operator guide: snoded on {ip} did not start")
            time.sleep(0.05)
        return first

    def _serving(self, ip: str) -> bool:
        client = RpcClient(f"http://{ip}:38091", timeout=2)
        try:
            client.call("get_height")
            return True
        except RpcUnavailable:
            return False
        finally:
            client.close()

    def rpc(self, ip: str, method: str, params: Any = None) -> Any:
        client = RpcClient(f"http://{ip}:38091", timeout=30)
        try:
            return client.call(method, params)
        finally:
            client.close()

    def run(self, name: str | None, shown: str, argv: list[str], *, ok: bool = True) -> str:
        """Run a command; record `$ shown` and its output under `name`; its output."""
        done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        out = (done.stdout + done.stderr).rstrip()
        if ok and done.returncode != 0:
            raise SystemExit(f"operator guide: `{shown}` failed: {out}")
        if name is not None:
            self.shots[name] = f"$ {shown}\n{out}"
        return out

    def cli(self, name: str | None, ip: str, *args: str, ok: bool = True) -> str:
        return self.run(name, "snode-cli " + " ".join(shlex.quote(a) for a in args),
                        [sys.executable, "-m", "snode.tools.cli", "--rpc", f"http://{ip}:38091", *args], ok=ok)

    def wallet(self, name: str | None, who: str, command: str, *, yes: bool = False, ok: bool = True,
               extra: tuple[str, ...] = ()) -> str:
        password = self.base / f"{who}.password"
        if not password.exists():
            password.write_text(f"a password for {who}\n")
        argv = [sys.executable, "-m", "snode.wallet", "--regtest", f"--daemon-address={IPS[0]}:38091",
                f"--wallet-file={self.base / (who + '.wallet')}", f"--password-file={password}", *extra,
                "--command", command, *(["--yes"] if yes else [])]
        shown = f'snode-wallet --wallet-file {who}.wallet --command "{command}"' + (" --yes" if yes else "")
        return self.run(name, shown, argv, ok=ok)

    def mine(self, blocks: int = 1) -> None:
        self.rpc(IPS[0], "generate_blocks", {"blocks": blocks})

    def stop(self) -> None:
        for proc in self.daemons:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.daemons:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def story(c: Capture) -> None:
    """The operator's flow, as the guide tells it."""
    hub, solo, pool = IPS
    version = c.run(None, "", [sys.executable, "-m", "snode.app.daemon", "--version"])
    c.shots["version"] = "$ snoded --version\n" + version
    c.daemon(hub)
    first = c.daemon(solo, "--service-node", f"--add-priority-node={hub}:38090")
    c.shots["start"] = ("$ snoded --regtest --service-node --non-interactive --data-dir /var/lib/snode "
                        f"--add-priority-node {hub}:38090\n" + first)
    c.daemon(pool, "--service-node", f"--add-priority-node={hub}:38090")
    words = c.base / "faucet.words"
    words.write_text(REGTEST_FAUCET_WORDS + "\n")
    c.wallet(None, "faucet", "address", extra=(f"--restore-seed-file={words}",))
    addresses = {who: c.wallet(None, who, "address", extra=("--generate",)).splitlines()[-1]
                 for who in ("operator", "pool-operator", "alice")}
    for who, coins in (("operator", 200_010), ("pool-operator", 100_010), ("alice", 100_010)):
        c.wallet(None, "faucet", f"transfer {addresses[who]} {coins}", yes=True)
        c.mine(11)  # the faucet's change unlocks 10 blocks after its block
    c.wallet("balance", "operator", "balance")
    line = c.cli("register_cmd", solo, "register-cmd", "--address", addresses["operator"], "--amount", "200000")
    c.wallet("register", "operator", line.splitlines()[-1], yes=True)
    c.mine()
    _until_active(c, solo)
    c.cli("status", solo, "status")
    c.shots["readyz"] = f"$ curl -s http://{solo}:38091/readyz\n" + urllib.request.urlopen(
        f"http://{solo}:38091/readyz", timeout=10).read().decode()
    pool_line = c.cli("pool_cmd", pool, "register-cmd", "--cut", "5", "--address", addresses["pool-operator"],
                      "--amount", "100000")
    c.wallet(None, "pool-operator", pool_line.splitlines()[-1], yes=True)
    c.mine()
    pool_pk = c.rpc(pool, "get_service_node_key")["service_node_pubkey"]
    c.wallet("stake", "alice", f"stake {pool_pk} 100%", yes=True)
    c.mine()
    _until_active(c, pool)
    c.cli("nodes", hub, "nodes")
    c.wallet("rewards", "operator", "rewards")
    fleet = c.base / "fleet.txt"
    fleet.write_text(f"hub {hub}:38091\nsolo {solo}:38091\npool {pool}:38091\nold-server {GONE}:38091\n")
    c.run("fleet", "snode-cli fleet --fleet-file fleet.txt",
          [sys.executable, "-m", "snode.tools.cli", "fleet", f"--fleet-file={fleet}"])
    keys(c, hub, solo)
    solo_pk = c.rpc(solo, "get_service_node_key")["service_node_pubkey"]
    c.wallet("unlock", "operator", f"request_stake_unlock {solo_pk}", yes=True)
    c.mine()
    c.wallet("stakes", "operator", "stakes")
    c.cli("status_unlocking", solo, "status")
    errors(c, addresses, solo, solo_pk)


def keys(c: Capture, hub: str, solo: str) -> None:
    """The solo node's key: shown, exported to a sealed file, imported into a new data dir."""
    passphrase = c.base / "key-passphrase"
    passphrase.write_text("a passphrase for the key\n")
    passphrase.chmod(0o600)
    data_dir, new_dir, sealed = c.base / solo, c.base / "new-server", c.base / "sn-key.json"
    ask = [f"--daemon-address={hub}:38091"]
    for name, home, args in (("key_show", data_dir, [*ask, "key", "show"]),
                             ("key_export", data_dir, ["key", "export", str(sealed), f"--password-file={passphrase}"]),
                             ("key_import", new_dir, [*ask, "key", "import", str(sealed),
                                                      f"--password-file={passphrase}"])):
        argv = ["--regtest", f"--data-dir={home}", *args]
        c.run(name, "snode-cli " + " ".join(shlex.quote(a) for a in argv),
              [sys.executable, "-m", "snode.tools.cli", *argv])


def errors(c: Capture, addresses: dict[str, str], solo: str, solo_pk: str) -> None:
    """Refusals an operator meets, each as printed."""
    lines = []
    for args in (["register-cmd", "--address", addresses["alice"], "--amount", "200,000"],
                 ["register-cmd", "--address", addresses["alice"], "--amount", "50"],
                 ["register-cmd", "--address", addresses["alice"] + " x", "--amount", "200000"]):
        lines.append(c.cli(None, solo, *args, ok=False))
    lines.append(c.wallet(None, "alice", f"request_stake_unlock {solo_pk}", ok=False))
    lines.append(c.wallet(None, "operator", f"request_stake_unlock {solo_pk}", ok=False))
    lines.append(c.wallet(None, "alice", "transfer snt1qqqq 5", ok=False))
    lines.append(c.wallet(None, "alice", "transfer " + addresses["operator"] + " 900000", ok=False))
    lines.append(c.run(None, "", [sys.executable, "-m", "snode.app.daemon", "--service-node",
                                  "--data-dir=/tmp/snode-guide-never"], ok=False))
    c.shots["errors"] = "\n".join(line.splitlines()[-1] for line in lines)


def _until_active(c: Capture, ip: str) -> None:
    pubkey = c.rpc(ip, "get_service_node_key")["service_node_pubkey"]
    for _ in range(60):
        c.mine()
        found = c.rpc(IPS[0], "get_service_nodes", {"service_node_pubkeys": [pubkey]})["service_node_states"]
        if found and found[0]["payable"]:
            return
        time.sleep(0.3)
    raise SystemExit(f"operator guide: {pubkey[:16]} did not become active")


def render(template: str, shots: dict[str, str]) -> str:
    """The template with each `{{name}}` replaced by its capture (a fenced block)."""
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in shots:
            raise SystemExit(f"operator guide: the template asks for {{{{{name}}}}}, which was not captured")
        return "```\n" + _scrub(shots[name]) + "\n```"
    return re.sub(r"\{\{(\w+)\}\}", replace, template)


def _scrub(text: str) -> str:
    """The run's temporary directory as the path an operator would use."""
    return re.sub(r"/tmp/snode-guide-[\w]+", "/var/lib/snode", text)


def main(argv: list[str] | None = None) -> None:
    """`python -m snode.tools.operator_guide [OUTPUT]` (default docs/OPERATOR.md)."""
    args = sys.argv[1:] if argv is None else argv
    output = Path(args[0]) if args else OUTPUT
    with tempfile.TemporaryDirectory(prefix="snode-guide-") as tmp:
        capture = Capture(Path(tmp))
        try:
            story(capture)
        finally:
            capture.stop()
    output.write_text(render(TEMPLATE.read_text(), capture.shots))
    print(f"wrote {output} ({len(capture.shots)} captures)")


if __name__ == "__main__":
    main()
