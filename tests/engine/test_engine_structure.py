"""The distributed engine's structure: no import circle through it, one typed record per wire
kind, and an RPC layer that knows nothing of the launcher."""

from __future__ import annotations


import pytest

from test_layering import import_circles, runtime_import_graph
from zgrad.distributed.rpc.messages import check_meta
from zgrad.distributed.rpc.targets import ZGRAD_ENTRY_POINTS
from zgrad.engine.dist import protocol
from paths import PACKAGE



def test_no_import_circle_runs_through_the_distributed_engine_or_the_rpc_seam():
    watched = ("zgrad.engine", "zgrad.distributed.autograd", "zgrad.distributed.rpc.hooks",
               "zgrad.distributed.rpc.shutdown", "zgrad.distributed.rpc.api")
    through = [c for c in import_circles(runtime_import_graph()) if any(m.startswith(watched) for m in c)]
    assert not through, through


def test_the_circle_finder_finds_a_circle():
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


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
