"""Headless Chromium driven over the DevTools protocol (a websocket on loopback, aiohttp's client):
open a page, run JavaScript in it, take a screenshot. For the browser tests (marked `browser`;
`make browser-test` installs Debian's chromium).

The `browser` fixture keeps a screenshot of every page a test looked at (taken as it left the
page, and of the last one at the end) under build/artifacts/browser/<test>/ when the test fails.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.functional.framework import scaled, wait_until

ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "artifacts"


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.skip("chromium is not installed: `make browser-test` installs Debian's package")
    return found


class Browser:
    """One headless Chromium with one page; every call is bounded in time."""

    def __init__(self, profile: Path, shots: Path) -> None:
        self.shots = shots
        self.url = ""
        self._taken = 0
        self._id = 0
        port_file = profile / "DevToolsActivePort"
        self.proc = subprocess.Popen(
            [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={profile}", "--remote-debugging-address=127.0.0.1",
             "--remote-debugging-port=0", "--window-size=1280,900", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)  # its helpers share its process group, stopped by our child's pid
        try:
            wait_until(lambda: port_file.exists() and port_file.read_text().strip(), timeout=60,
                       what="chromium's DevTools port")
            port = int(port_file.read_text().split()[0])
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=scaled(10)) as r:
                targets = json.load(r)
            page = next(t for t in targets if t["type"] == "page")
            self.loop = asyncio.new_event_loop()
            self.session, self.ws = self.loop.run_until_complete(self._connect(page["webSocketDebuggerUrl"]))
        except BaseException:
            self._stop_process()
            raise
        self.send("Page.enable")
        self.send("Runtime.enable")

    @staticmethod
    async def _connect(url: str) -> tuple[aiohttp.ClientSession, aiohttp.ClientWebSocketResponse]:
        session = aiohttp.ClientSession()
        return session, await session.ws_connect(url, max_msg_size=0)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command and its result (events that come meanwhile are not needed)."""
        self._id += 1
        ident = self._id

        async def call() -> dict[str, Any]:
            await self.ws.send_json({"id": ident, "method": method, "params": params})
            while True:
                message = json.loads((await self.ws.receive()).data)
                if message.get("id") == ident:
                    if "error" in message:
                        raise AssertionError(f"{method}: {message['error']}")
                    return message["result"]

        return self.loop.run_until_complete(asyncio.wait_for(call(), scaled(30)))

    def goto(self, url: str) -> None:
        """Open `url` and wait until it has loaded (a screenshot of the page left is kept)."""
        if self.url:
            self.screenshot()
        self.send("Page.navigate", url=url)
        self.url = url
        wait_until(lambda: self.eval("document.readyState") == "complete" and self.eval("location.href") == url,
                   timeout=30, what=f"{url} loaded")

    def eval(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self) -> Path:
        self.shots.mkdir(parents=True, exist_ok=True)
        self._taken += 1
        name = re.sub(r"[^A-Za-z0-9]+", "-", self.url.split("/", 3)[-1]).strip("-") or "index"
        path = self.shots / f"{self._taken:02d}-{name}.png"
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"]))
        return path

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.ws.close())
            self.loop.run_until_complete(self.session.close())
        finally:
            self.loop.close()
            self._stop_process()

    def _stop_process(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=scaled(10))
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def browser(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Browser]:
    shots = tmp_path / "shots"
    driver = Browser(tmp_path / "profile", shots)
    try:
        yield driver
    finally:
        report = getattr(request.node, "rep_call", None)
        failed = report is None or report.failed
        if failed and driver.url:
            try:
                driver.screenshot()
            except Exception:  # noqa: BLE001 - a broken page must not hide the test's own failure
                pass
        driver.close()
        if failed and shots.exists():
            kept = ARTIFACTS / "browser" / request.node.name
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(shots, kept)
            print(f"screenshots of each page kept in {kept}")
