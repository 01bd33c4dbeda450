"""The monitoring files under contrib/ as the tests read them: the alert rules, the Grafana
dashboard's queries, and the metric names a query reads."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

CONTRIB = Path(__file__).resolve().parents[1] / "contrib"
ALERTS = CONTRIB / "prometheus" / "alerts.yml"
DASHBOARD = CONTRIB / "grafana" / "snode-dashboard.json"


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


def named_metrics(expr: str) -> set[str]:
    """The snode_/process_ metric names an expression reads (histogram and counter suffixes kept)."""
    return set(re.findall(r"\b((?:snode|process)_[a-z_]+)\b", expr))


def dashboard_exprs() -> list[str]:
    return [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p["targets"]]
