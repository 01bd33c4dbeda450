"""The narrow views of the node (`node.views`): `Node` is each of them (mypy checks the assignment
below), and the callers typed against one do not import the whole node back."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from snode.node.node import Node
from snode.node.views import NetNode, NodeView, SavingNode, SimNode

SRC = Path(__file__).resolve().parents[2] / "src" / "snode"
VIEWED = {
    "rpc/answers.py": "NodeView", "rpc/health.py": "NodeView", "rpc/metrics.py": "NodeView",
    "rpc/scrape.py": "NodeView", "rpc/web_view.py": "NodeView", "rpc/web_node.py": "NodeView",
    "rpc/registration.py": "NodeView", "node/readiness.py": "NodeView", "node/status.py": "NodeView",
    "net/peers.py": "NetNode", "net/relay.py": "NetNode", "services/saving.py": "SavingNode",
    "sim/stage.py": "SimNode",
}
"""Each module typed against a view, and its view."""
REACHING = re.compile(r"(?<!\w)node\.(hub\.publish\(|store\b|own_proof\.(refusal|refused_reason)\b)")


def views_of(node: Node) -> tuple[NodeView, NetNode, SavingNode, SimNode]:
    """Never called: mypy holds `Node` to every view here."""
    return node, node, node, node


def imported_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}


@pytest.mark.parametrize("module", sorted(VIEWED))
def test_a_caller_typed_against_a_view_does_not_import_the_node(module: str) -> None:
    names = imported_names(SRC / module)
    assert "snode.node.node.Node" not in names, f"{module} imports Node: type it against {VIEWED[module]}"
    assert f"snode.node.views.{VIEWED[module]}" in names, f"{module} no longer uses {VIEWED[module]}"


def test_no_caller_reaches_through_the_node_to_its_hub_store_or_own_proof_words() -> None:
    """`node.hub.publish`, `node.store` and `node.own_proof.refused_reason` are the node's business:
    the callers use `Node.publish`, its store commands and `Node.refused_reason`."""
    reaching = [f"{path.relative_to(SRC)}:{n + 1}: {line.strip()}"
                for path in SRC.rglob("*.py") if path != SRC / "node" / "node.py"
                for n, line in enumerate(path.read_text().splitlines()) if REACHING.search(line)]
    assert not reaching, reaching
