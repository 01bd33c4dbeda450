"""contrib/: the Prometheus alerting rules and the Grafana dashboard are well formed (issue #24,
item 10). promtool (Debian's `prometheus` package) checks the rules where it is installed; the
YAML schema below checks them everywhere. That every metric they name is one /metrics serves is
checked against a real daemon (tests/functional/test_metrics.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import jsonschema
import pytest
import yaml

from tests.contrib_files import ALERTS, DASHBOARD, alert_rules, dashboard_exprs, named_metrics

DURATION = r"^[0-9]+(ms|s|m|h|d|w|y)$"
RULES_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["groups"], "additionalProperties": False,
    "properties": {"groups": {"type": "array", "minItems": 1, "items": {
        "type": "object", "required": ["name", "rules"], "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "interval": {"type": "string", "pattern": DURATION},
            "rules": {"type": "array", "minItems": 1, "items": {
                "type": "object", "required": ["alert", "expr", "labels", "annotations"],
                "additionalProperties": False,
                "properties": {
                    "alert": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
                    "expr": {"type": "string", "minLength": 1},
                    "for": {"type": "string", "pattern": DURATION},
                    "labels": {"type": "object", "required": ["severity"], "properties": {
                        "severity": {"enum": ["critical", "warning", "info"]}}},
                    "annotations": {"type": "object", "required": ["summary", "description"],
                                    "additionalProperties": {"type": "string"}},
                }}},
        }}}},
}
"""Prometheus's rule-file format (alerting rules only, as this file has), with the labels and
annotations an operator's Alertmanager routes and shows."""


def test_the_alert_rules_follow_the_rule_file_schema():
    jsonschema.validate(yaml.safe_load(ALERTS.read_text()), RULES_SCHEMA)
    names = [r["alert"] for r in alert_rules()]
    assert len(names) == len(set(names)), names
    assert {"SnodeDecommissioned", "SnodeProofNotAccepted", "SnodeNoPeers", "SnodeSyncLag"} <= set(names)


def test_promtool_accepts_the_alert_rules():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (apt-get install prometheus); the schema test checks the file")
    out = subprocess.run([promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in out.stdout, out.stdout


def test_the_dashboard_is_an_importable_grafana_dashboard():
    board = json.loads(DASHBOARD.read_text())
    assert board["__inputs"][0]["pluginId"] == "prometheus"
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)), ids
    for panel in board["panels"]:
        assert panel["targets"] and {"x", "y", "w", "h"} <= set(panel["gridPos"]), panel["title"]
        assert all(t["datasource"]["uid"] == "${DS_PROMETHEUS}" for t in panel["targets"]), panel["title"]
    shown = set().union(*(named_metrics(e) for e in dashboard_exprs()))
    assert {"snode_own_state", "snode_own_proof_age_seconds", "snode_rpc_request_duration_seconds_bucket"} <= shown
