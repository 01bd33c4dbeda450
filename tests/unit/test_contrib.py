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


def _expected(alert: str, labels: dict[str, str], value: str = "") -> dict[str, Any]:
    """The alert as promtool's rule test expects it: its labels, its annotations rendered."""
    rule = next(r for r in alert_rules() if r["alert"] == alert)
    annotations = {k: v.replace("{{ $labels.instance }}", "a").replace("{{ $value }}", value)
                   for k, v in rule["annotations"].items()}
    return {"exp_labels": {**rule["labels"], "instance": "a", "job": "snode", **labels},
            "exp_annotations": annotations}


def _promtool_rule_test(tmp_path, series: dict[str, str], checks: list[dict[str, Any]]) -> None:
    """Run promtool's rule test of the alert rules on `series` (one value a minute)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    tests = {"rule_files": [str(ALERTS)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in series.items()],
        "alert_rule_test": checks,
    }]}
    spec = tmp_path / "alerts-test.yml"
    spec.write_text(yaml.safe_dump(tests))
    out = subprocess.run([promtool, "test", "rules", str(spec)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_alerts_fire_on_a_decommissioned_node_losing_credit_and_on_no_peers(tmp_path):
    # Minute by minute: active with peers, then decommissioned (credit running down) and alone.
    series = {
        'snode_own_state{state="Active",instance="a",job="snode"}': "1 1 0 0 0 0 0",
        'snode_own_state{state="Decomm",instance="a",job="snode"}': "0 0 1 1 1 1 1",
        'snode_own_downtime_credit_blocks{instance="a",job="snode"}': "80 80 59 58 57 56 55",
        'snode_own_payable{instance="a",job="snode"}': "1 1 0 0 0 0 0",
        'snode_peers{instance="a",job="snode"}': "3 0 0 0 0 0 0",
    }
    _promtool_rule_test(tmp_path, series, [
        {"eval_time": "1m", "alertname": "SnodeDecommissioned", "exp_alerts": []},
        {"eval_time": "5m", "alertname": "SnodeDecommissioned",
         "exp_alerts": [_expected("SnodeDecommissioned", {"state": "Decomm"})]},
        {"eval_time": "1m", "alertname": "SnodeCreditRunningOut", "exp_alerts": []},
        {"eval_time": "6m", "alertname": "SnodeCreditRunningOut",
         "exp_alerts": [_expected("SnodeCreditRunningOut", {}, "55")]},
        {"eval_time": "5m", "alertname": "SnodeNoPeers", "exp_alerts": []},
        {"eval_time": "6m", "alertname": "SnodeNoPeers", "exp_alerts": [_expected("SnodeNoPeers", {})]},
        {"eval_time": "6m", "alertname": "SnodeNotPayable", "exp_alerts": []},
    ])


def test_the_credit_low_alert_fires_on_an_active_node_short_of_an_outage_and_deregistered_after(tmp_path):
    """Issue #38, item 1: back Active with credit 40 (a recommission's penalty), the next outage
    deregisters the node; SnodeCreditRunningOut, for decommissioned nodes only, said nothing."""
    # Minute by minute: active with a full credit, recommissioned with 40, credit grows to 60, then
    # (a second outage while it was short) deregistered.
    series = {
        'snode_own_state{state="Active",instance="a",job="snode"}': "1 1 1 1 1 0 0",
        'snode_own_state{state="Deregistered",instance="a",job="snode"}': "0 0 0 0 0 1 1",
        'snode_own_downtime_credit_blocks{instance="a",job="snode"}': "80 40 41 60 40 _ _",
        'snode_own_downtime_credit_minimum_blocks{instance="a",job="snode"}': "60 60 60 60 60 _ _",
    }
    _promtool_rule_test(tmp_path, series, [
        {"eval_time": "0m", "alertname": "SnodeCreditLow", "exp_alerts": []},
        {"eval_time": "1m", "alertname": "SnodeCreditLow",
         "exp_alerts": [_expected("SnodeCreditLow", {}, "40")]},
        {"eval_time": "2m", "alertname": "SnodeCreditLow",
         "exp_alerts": [_expected("SnodeCreditLow", {}, "41")]},
        {"eval_time": "3m", "alertname": "SnodeCreditLow", "exp_alerts": []},
        {"eval_time": "1m", "alertname": "SnodeCreditRunningOut", "exp_alerts": []},
        {"eval_time": "4m", "alertname": "SnodeDeregistered", "exp_alerts": []},
        {"eval_time": "5m", "alertname": "SnodeDeregistered",
         "exp_alerts": [_expected("SnodeDeregistered", {"state": "Deregistered"})]},
    ])
