"""Traces and graphs of distributed backward passes: ``dist_autograd.trace``, ``[engine] trace``,
``dist_autograd.graph`` and ``zgrad-launch trace``.

The traces are checked for what a reader relies on: every node that ran and every message of the
pass, on both workers, with a flow from each message's send to its arrival, in causal order on
the aligned clocks. The fake world (one clock, any delivery order) checks the assembly; real RPC
checks the collection and the clock alignment across workers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter

import numpy as np
import pytest

import rpc_targets as T
import zgrad
from fake_world import World
from rpc_harness import make_config, run_workers
from zgrad.distributed import autograd as dist_autograd
from zgrad.distributed import rpc
from zgrad.distributed.autograd.timeline import WorkerTrace, chrome_trace
from zgrad.engine.dist.graph import describe_context, to_dot
from zgrad.engine.dist.trace import clock_ns
from zgrad.errors import AutogradError
from zgrad.launch.cli import main as launch_main
from zgrad.launch.trace_summary import summarize

pytestmark = pytest.mark.timeout(120)

# The design note's example: t3 = rpc_sync(worker1, add, (t1, t2)); loss = (t3 * t4).sum()
NODES = {0: Counter({"GraphRoot": 1, "SumBackward0": 1, "MulBackward0": 1, "RecvRpcBackward": 1, "SendRpcBackward": 1,
                     "AccumulateGrad": 3}),
         1: Counter({"SendRpcBackward": 1, "AddBackward0": 1, "RecvRpcBackward": 1})}
MESSAGES = {"fast": Counter({(0, 1, "GRAD"): 1, (1, 0, "GRAD_ACK"): 1}),
            "smart": Counter({(0, 1, "GRAD"): 1, (1, 0, "GRAD_ACK"): 1, (0, 1, "DISCOVER"): 1, (1, 0, "DISCOVER_ACK"): 1,
                              (0, 1, "START"): 1})}
# Causal chain of the pass: (worker, node or message slice), each starting after the one before.
CHAIN = [(0, "SumBackward0"), (0, "MulBackward0"), (0, "RecvRpcBackward"), (0, "send GRAD → rank 1"),
         (1, "recv GRAD ← rank 0"), (1, "SendRpcBackward"), (1, "AddBackward0"), (1, "RecvRpcBackward"),
         (1, "send GRAD_ACK → rank 0"), (0, "recv GRAD_ACK ← rank 1"), (0, "SendRpcBackward")]


def leaves(seed=0):
    zgrad.manual_seed(seed)
    return [zgrad.randn(3, 3, dtype=zgrad.float64, requires_grad=True) for _ in range(3)]


def slices(trace, pid, category=None):
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == pid and category in (None, e["cat"])]


def assert_design_note_trace(trace, mode):
    """Every node and message of both workers is there, each message has its flow, in causal order."""
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {0: "worker0 (rank 0)", 1: "worker1 (rank 1)"}
    for pid, expected in NODES.items():
        assert Counter(e["name"] for e in slices(trace, pid, "node")) == expected, pid
    messages = Counter()
    for pid in (0, 1):
        for event in slices(trace, pid, "message"):
            direction, kind, _, peer = event["name"].split()[:4]
            src, dst = (pid, int(event["args"]["peer"])) if direction == "send" else (int(event["args"]["peer"]), pid)
            messages[(direction, src, dst, kind)] += 1
    expected = MESSAGES[mode]
    assert messages == Counter({(d, *key): n for key, n in expected.items() for d in ("send", "recv")})
    flows = {}
    for event in trace["traceEvents"]:
        if event["ph"] in ("s", "f"):
            flows.setdefault(event["id"], {})[event["ph"]] = event
    assert len(flows) == sum(expected.values()), "one flow per message"
    for flow in flows.values():
        assert flow["f"]["ts"] >= flow["s"]["ts"], f"{flow['s']['name']} arrived before it left"
    starts = []
    for pid, name in CHAIN:
        (event,) = [e for e in slices(trace, pid) if e["name"] == name]
        starts.append(event["ts"])
    assert starts == sorted(starts), list(zip(CHAIN, starts))


# --- the fake world: assembly, any delivery order ----------------------------------------------

def traced_world_pass(program, mode, seed, size=2):
    world = World(size, seed)
    cid = world.context(0)
    session = world.engines[0].recorder.open_session()
    loss = program(world, cid)
    _, completion = world.backward(0, cid, [loss], mode=mode)
    world.deliver_all()
    completion.result()
    traces = [WorkerTrace(0, "worker0", world.engines[0].recorder.collect(session.passes, 1.0))]
    for rank in range(1, size):
        before = clock_ns()
        recordings = world.engines[rank].recorder.collect(session.passes, 1.0)
        traces.append(WorkerTrace(rank, f"worker{rank}", recordings, (before, clock_ns(), clock_ns())))
    return world, cid, chrome_trace(traces)


def design_note(world, cid):
    t1, t2, t4 = leaves()
    return (world.rpc(cid, 0, 1, zgrad.add, t1, t2) * t4).sum()


@pytest.mark.parametrize("mode", ["fast", "smart"])
@pytest.mark.parametrize("seed", range(6))
def test_the_design_note_trace_in_the_fake_world_is_complete_and_causal(mode, seed):
    world, _, trace = traced_world_pass(design_note, mode, seed)
    assert_design_note_trace(trace, mode)
    assert all(rec_sent == 0 for rec_sent in (len(e.recorder.recordings) for e in world.engines)), \
        "collected recordings are handed over, not kept"


def test_untraced_passes_record_nothing_and_say_nothing():
    world = World(2)
    cid = world.context(0)
    loss = design_note(world, cid)
    for mode in ("fast", "smart"):
        _, completion = world.backward(0, cid, [loss], mode=mode, retain_graph=True)
        world.deliver_all()
        completion.result()
    assert all(not e.recorder.recordings for e in world.engines)
    assert all("trace" not in body for _, _, _, body in world.log)
    assert all(e.recorder.sessions == [] for e in world.engines)


# --- real RPC: collection, clock alignment -----------------------------------------------------

@pytest.mark.parametrize("transport", ["tcp", "inproc"])
@pytest.mark.parametrize("mode", ["fast", "smart"])
def test_the_design_note_trace_contains_every_node_and_message_of_both_workers_in_causal_order(mode, transport,
                                                                                             tmp_path):
    path = tmp_path / "pass.json"

    def body(rank):
        if rank != 0:
            return None
        t1, t2, t4 = leaves()
        with dist_autograd.trace(path):
            with dist_autograd.context() as context_id:
                loss = (rpc.rpc_sync("worker1", T.add, args=(t1, t2)) * t4).sum()
                dist_autograd.backward(context_id, [loss], mode=mode)
                grads = dist_autograd.get_gradients(context_id)
        np.testing.assert_allclose(grads[t1].numpy(), t4.numpy())
        return rpc.rpc_sync("worker1", T.dist_debug_info)

    worker1_counters = run_workers(2, make_config(transport, 2, tmp_path), body)[0]
    trace = json.loads(path.read_text())
    assert_design_note_trace(trace, mode)
    assert sum(e["ph"] == "X" and e["cat"] == "wait" for e in trace["traceEvents"]) >= 1, "the root's waits"
    assert [e["name"] for e in slices(trace, 0, "backward")] == [f"backward ({mode})"]
    assert abs(trace["otherData"]["clock_offsets_ns"]["1"]) < 5_000_000, "one host: the clocks agree"
    assert worker1_counters["messages_sent.GRAD_ACK"] >= 1


def test_a_job_wide_trace_and_its_summary_table(tmp_path, capsys):
    """[engine] trace = true records every pass a worker roots; it writes them when it shuts
    down; zgrad-launch trace prints one row per worker."""
    trace_file = tmp_path / "job-{worker}.json"
    config = make_config("inproc", 3, engine={"trace": True, "trace_file": str(trace_file)})

    def body(rank):
        if rank != 0:
            return None
        t1, t2, t4 = leaves()
        for mode in ("fast", "smart", "fast"):
            with dist_autograd.context() as context_id:
                nested = rpc.rpc_sync("worker1", T.nested_add, args=("worker2", t1, t2))
                dist_autograd.backward(context_id, [(nested * t4).sum()], mode=mode)

    run_workers(3, config, body)
    assert not (tmp_path / "job-worker1.json").exists(), "only the root writes"
    trace = json.loads((tmp_path / "job-worker0.json").read_text())
    assert len(trace["otherData"]["passes"]) == 3
    rows = summarize(trace)
    assert [row.worker for row in rows] == ["worker0 (rank 0)", "worker1 (rank 1)", "worker2 (rank 2)"]
    assert all(row.passes == 3 and row.nodes > 0 and row.compute_ms > 0 for row in rows)
    assert rows[0].sent["GRAD"] == 3 and rows[2].received["GRAD"] == 3
    assert rows[1].received["GRAD"] == 6, "from worker0, and back from worker2"
    assert rows[1].sent["DISCOVER"] == 1, "the SMART pass's discovery reached worker2 through worker1"
    assert launch_main(["trace", str(tmp_path / "job-worker0.json")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["worker", "passes", "tasks", "nodes", "compute", "ms", "waiting", "ms",
                                           "sent", "received"]
    assert "worker2 (rank 2)" in out and "GRAD_ACK" in out
    assert launch_main(["trace", str(tmp_path / "missing.json")]) == 2


def test_a_failing_pass_is_traced_too(tmp_path):
    path = tmp_path / "failed.json"

    def body(rank):
        if rank != 0:
            return None
        (a,) = leaves()[:1]
        with dist_autograd.trace(path):
            with dist_autograd.context() as context_id:
                loss = rpc.rpc_sync("worker1", T.call_failing, args=("worker2", a)).sum()
                with pytest.raises(AutogradError, match="simulated error in backward"):
                    dist_autograd.backward(context_id, [loss])

    run_workers(3, make_config("inproc", 3), body)
    trace = json.loads(path.read_text())
    sent = Counter(e["name"].split()[1] for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "message"
                   and e["name"].startswith("send"))
    assert sent["FAILURE"] >= 1 and {e["pid"] for e in trace["traceEvents"]} == {0, 1, 2}


# --- graphs ------------------------------------------------------------------------------------

def unreachable(dot):
    """(worker rank, node name) of every node the DOT text greys out."""
    return sorted((int(line.split("n")[0].strip()[1:]), line.split('label="')[1].split("\\n")[0].split('"')[0])
                  for line in dot.splitlines() if "not reached by SMART discovery" in line)


UNUSED_RPC_NODES = [(0, "RecvRpcBackward"), (0, "SendRpcBackward"), (1, "AddBackward0"), (1, "RecvRpcBackward"),
                    (1, "SendRpcBackward")]


def test_the_dot_of_a_smart_pass_with_an_unused_rpc_marks_it_unreachable_in_the_fake_world():
    a, b = leaves()[:2]
    world = World(2)
    cid = world.context(0)
    used = world.rpc(cid, 0, 1, zgrad.mul, a, b)
    world.rpc(cid, 0, 1, zgrad.add, a, b)  # unused
    _, completion = world.backward(0, cid, [used.sum()], mode="smart")
    world.deliver_all()
    completion.result()
    dot = to_dot(cid, [describe_context(world.contexts[r].get(cid), r, f"worker{r}") for r in range(2)])
    assert unreachable(dot) == UNUSED_RPC_NODES
    assert dot.count("subgraph cluster_") == 2
    assert dot.count('label="GRAD"') == 4, "each recv node points to its send node on the peer"
    if shutil.which("dot"):  # Graphviz accepts it, where it is installed
        rendered = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True, timeout=60)
        assert rendered.returncode == 0 and "<svg" in rendered.stdout, rendered.stderr


def test_the_dot_of_a_smart_pass_with_an_unused_rpc_marks_it_unreachable(tmp_path):
    def body(rank):
        if rank != 0:
            return None
        a, b = leaves()[:2]
        with dist_autograd.context() as context_id:
            used = rpc.rpc_sync("worker1", T.mul, args=(a, b))
            rpc.rpc_sync("worker1", T.add, args=(a, b))  # unused
            before = dist_autograd.graph(context_id)
            dist_autograd.backward(context_id, [used.sum()], mode="smart", retain_graph=True)
            smart = dist_autograd.graph(context_id)
        with pytest.raises(AutogradError, match="Could not find autograd context"):
            dist_autograd.graph(context_id)
        return before, smart

    before, smart = run_workers(2, make_config("tcp", 2, tmp_path), body)[0]
    assert unreachable(before) == [], "no pass yet: nothing is known unreachable"
    assert unreachable(smart) == UNUSED_RPC_NODES
    assert "worker1 (rank 1)" in smart and "MulBackward0" in smart and "SumBackward0" in smart
