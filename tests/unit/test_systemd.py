"""sd_notify speaks the datagram protocol systemd expects, and is silent outside systemd."""

from __future__ import annotations

import socket

from snode.app.systemd import notify


def test_notify_sends_one_datagram(tmp_path, monkeypatch):
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        assert notify("READY=1\nSTATUS=v0.1.0; Height: 0, SN: no")
        server.settimeout(5)
        assert server.recv(1024) == b"READY=1\nSTATUS=v0.1.0; Height: 0, SN: no"


def test_notify_without_systemd(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert notify("READY=1") is False
    monkeypatch.setenv("NOTIFY_SOCKET", "/nonexistent/socket")
    assert notify("READY=1") is False
