"""`GET /metrics` has what an operator alerts on (issue #24, item 10), read from real daemons by
prometheus_client's own parsers: this node's state as one labelled gauge, the age of its last
proof the network accepted, its downtime credit, payable, peers, sync lag, snode_build_info, the
process metrics, and RPC latency histograms in seconds; OpenMetrics when the scraper asks for it.
promtool (Debian's `prometheus` package), where installed, lints both formats."""

from __future__ import annotations

import math
import platform
import shutil
import subprocess

from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from snode import __version__
from tests.contrib_files import alert_rules, dashboard_exprs, named_metrics
from tests.functional.framework import assert_equal, connect_nodes, narrator, scaled
from tests.functional.metrics_helpers import samples, scrape, value
from tests.functional.sn_helpers import record, registered_solo

log = narrator(__name__)
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def _promtool_lints(text: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        log.info("promtool is not installed (Debian's prometheus package): its lint is skipped")
        return
    out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True,
                         timeout=scaled(30))
    assert_equal((out.returncode, out.stdout + out.stderr), (0, ""), "promtool check metrics")


def test_metrics_show_this_nodes_own_state_and_rpc_latency(nodes):
    hub = nodes.add()
    sn = nodes.add(extra_args=["--service-node"])
    connect_nodes(sn, hub)
    log.info("Before its registration: Unregistered, one peer, no lag, build info, process metrics")
    found = samples(sn)
    assert_equal([s for s in ("Active", "Decomm", "Await", "Unregistered") if value(found, "snode_own_state", state=s)],
                 ["Unregistered"])
    assert_equal((value(found, "snode_peers"), value(found, "snode_sync_lag_blocks")), (1.0, 0.0))
    assert_equal(value(found, "snode_build_info", version=__version__, network="regtest",
                       python=platform.python_version()), 1.0)
    assert value(found, "process_resident_memory_bytes") > 0 and value(found, "process_open_fds") > 0
    assert ("snode_own_proof_age_seconds", ()) not in found, "no proof age before a registration"
    assert ("snode_own_state", (("state", "Active"),)) not in samples(hub), "a plain node has no own state"

    log.info("Registered, active and payable: the state, a recent proof, credit, payable")
    pubkey = registered_solo(hub, sn, "metrics op", until="payable")
    found = samples(sn)
    assert_equal(value(found, "snode_own_state", state="Active"), 1.0)
    assert_equal(value(found, "snode_own_state", state="Unregistered"), 0.0)
    assert_equal(value(found, "snode_own_payable"), 1.0)
    assert_equal(value(found, "snode_own_downtime_credit_blocks"), float(record(sn, pubkey)["earned_downtime_blocks"]))
    age = value(found, "snode_own_proof_age_seconds")
    assert 0 <= age < 60 and not math.isinf(age), age

    log.info("RPC latency: a histogram in seconds per method; unknown names are counted as 'other'")
    before = value(found, "snode_rpc_request_duration_seconds_count", method="get_height")
    for _ in range(5):
        sn.get_height()
    try:
        sn.rpc.call("no_such_method_for_metrics")
    except Exception:  # noqa: BLE001 - the refusal is not what is tested here
        pass
    found = samples(sn)
    assert_equal(value(found, "snode_rpc_request_duration_seconds_count", method="get_height"), before + 5)
    assert_equal(value(found, "snode_rpc_request_duration_seconds_bucket", method="get_height", le="+Inf"),
                 before + 5)
    assert 0 < value(found, "snode_rpc_request_duration_seconds_sum", method="get_height") < 5
    assert value(found, "snode_rpc_request_duration_seconds_count", method="other") >= 1
    assert not any("no_such_method" in str(k) for k in found)

    log.info("OpenMetrics when asked (Accept), the text format otherwise; promtool lints both")
    content_type, text = scrape(sn)
    assert content_type.startswith("text/plain; version=0.0.4"), content_type
    _promtool_lints(text)
    content_type, om = scrape(sn, OPENMETRICS)
    assert content_type.startswith("application/openmetrics-text"), content_type
    assert om.endswith("# EOF\n")
    names = {f.name for f in openmetrics_families(om)}
    assert {"snode_own_state", "snode_build", "snode_rpc_request_duration_seconds", "process_cpu_seconds"} <= names

    log.info("Every metric the shipped alert rules and Grafana dashboard read is one this node serves")
    served = {s.name for family in text_string_to_metric_families(text) for s in family.samples}
    for expr in [r["expr"] for r in alert_rules()] + dashboard_exprs():
        assert named_metrics(expr) <= served, (expr, named_metrics(expr) - served)
