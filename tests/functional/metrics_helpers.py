"""Reading a daemon's `GET /metrics` in functional tests, by prometheus_client's own parser."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.functional.framework import TestNode, assert_equal


def scrape(node: TestNode, accept: str | None = None) -> tuple[str, str]:
    status, headers, body = node.rpc.raw("", method="GET", path="/metrics",
                                         headers={"Accept": accept} if accept else None)
    assert_equal(status, 200)
    return headers["content-type"], body.decode()


def samples(node: TestNode) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a text-format scrape: (name, sorted labels) -> value."""
    _, text = scrape(node)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: dict[tuple[str, Any], float], name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]
