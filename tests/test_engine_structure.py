"""The distributed engine's structure: no import circle through it, one typed record per wire
kind, and an RPC layer that knows nothing of the launcher."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from zgrad.distributed.rpc.messages import check_meta
from zgrad.distributed.rpc.targets import ZGRAD_ENTRY_POINTS
from zgrad.engine import dist_protocol as protocol

PACKAGE = Path(__file__).resolve().parent.parent / "zgrad"


def import_graph() -> dict[str, set[str]]:
    """Module -> the zgrad modules it imports (every import statement: lazy and TYPE_CHECKING ones too)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_no_import_circle_runs_through_the_distributed_engine_or_the_rpc_seam():
    watched = ("zgrad.engine", "zgrad.distributed.autograd", "zgrad.distributed.rpc.hooks",
               "zgrad.distributed.rpc.shutdown", "zgrad.distributed.rpc.api")
    through = [sorted(c) for c in circles(import_graph()) if any(m.startswith(watched) for m in c)]
    assert not through, through


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_the_rpc_layer_knows_nothing_of_the_launcher():
    assert not [name for name in ZGRAD_ENTRY_POINTS if name.startswith("zgrad.launch")]
    for path in (PACKAGE / "distributed" / "rpc").glob("*.py"):
        assert "zgrad.launch" not in path.read_text(encoding="utf-8"), path.name


RECORDS = [
    protocol.Grad(1, 2, 3, 0, True, "smart", 4, trace=True), protocol.Grad(1, 2, 3, 0, False, "fast", 4),
    protocol.WorkReport(1, 2, 4, [[5, 1, 3]], None, True, [[6, 3, 2]]), protocol.WorkReport(1, 2, 4, [], "boom", False),
    protocol.Discover(1, 2, 3, 0, False, 4), protocol.DiscoveryReport(1, 2, 4, [[5, 1, 3]], None, True, [[7, 8]]),
    protocol.Start(1, 2), protocol.Start(1, 2, 9), protocol.PassEnd(1, 2, 10), protocol.Failure(1, 2, "boom", 11),
    protocol.ContextRelease(1, 12),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_every_record_fits_its_kind_schema_and_survives_the_wire(record):
    body = record.to_body()
    schema = protocol.BODY_SCHEMAS[record.KIND]
    check_meta(0, body, schema)
    arrays = [None] * sum(g[2] for g in body.get("grads", []))
    decoded = type(record).from_body(body, arrays) if record.KIND in protocol.REPORT_KINDS else type(record).from_body(body)
    assert decoded == record


def test_every_kind_has_a_schema_and_the_answers_say_what_they_answer():
    assert set(protocol.BODY_SCHEMAS) == set(protocol.KINDS)
    for kind in protocol.ACK_KINDS:
        body = protocol.Answer(3, unexecuted=[[1, 2]]).to_body(kind)
        check_meta(0, body, protocol.BODY_SCHEMAS[kind])
        assert protocol.Answer.from_body(body).seq == 3
