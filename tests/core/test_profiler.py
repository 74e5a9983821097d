"""zgrad.profiler and zgrad.autograd.profiler: what a profile records (ops, backward nodes,
ranges, their nesting and threads), PyTorch's schedule, table and trace, and nothing left behind."""

from __future__ import annotations

import json
import threading
import warnings

import pytest

import zgrad
from zgrad import nn
from zgrad.autograd.function import Function, Op
from zgrad.profiler import ProfilerAction, profile, record_function, schedule


def _step(model: nn.Module, x: zgrad.Tensor) -> None:
    nn.functional.cross_entropy(model(x), zgrad.tensor([0, 1, 2, 1])).backward()


def test_a_profile_records_ops_backward_nodes_and_ranges_nested():
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
    x = zgrad.randn(4, 6)
    _step(model, x)  # compiled before
    with profile(record_shapes=True) as prof:
        with record_function("forward_pass"):
            loss = nn.functional.cross_entropy(model(x), zgrad.tensor([0, 1, 2, 1]))
        loss.backward()
    events = prof.events()
    names = [e.name for e in events]
    assert names.count("zgrad::linear") == 2 and "zgrad::relu" in names and "forward_pass" in names
    assert "autograd::engine::evaluate_function: LinearBackward0" in names
    assert names.count("autograd::engine::evaluate_function: AccumulateGrad") == 4
    outer = next(e for e in events if e.name == "forward_pass")
    inside = [e for e in events if e.depth == 1]
    assert {e.name for e in inside} >= {"zgrad::linear", "zgrad::relu"}
    assert all(outer.start_ns <= e.start_ns and e.end_ns <= outer.end_ns for e in inside)
    assert outer.self_ns == outer.duration_ns - sum(e.duration_ns for e in inside)
    linear = next(e for e in events if e.name == "zgrad::linear")
    assert linear.input_shapes == [[4, 6], [5, 6], [5]]
    averages = {a.key: a for a in prof.key_averages()}
    assert averages["zgrad::linear"].count == 2
    assert averages["forward_pass"].cpu_time_total == pytest.approx(outer.duration_ns / 1e3)


def test_nothing_is_left_patched_and_ranges_outside_a_profile_cost_nothing():
    op_apply, function_apply = Op.__dict__["apply"], Function.__dict__["apply"]
    with profile():
        assert Op.__dict__["apply"] is not op_apply
    assert Op.__dict__["apply"] is op_apply and Function.__dict__["apply"] is function_apply
    with record_function("idle"):
        zgrad.ones(2) + 1
    with pytest.raises(ValueError):
        with profile():
            raise ValueError("inside")
    assert Op.__dict__["apply"] is op_apply
    from zgrad.engine import graph_task
    assert graph_task.local_pass_observer is None


def test_one_profiler_at_a_time():
    with profile():
        with pytest.raises(RuntimeError, match="another profiler is already running"):
            with profile():
                pass


def test_user_functions_decorated_ranges_and_other_threads_are_recorded():
    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            return x * x * x

        @staticmethod
        def backward(ctx, grad):
            return grad

    @record_function("decorated")
    def work():
        return Cube.apply(zgrad.ones(3, requires_grad=True))

    with profile() as prof:
        work().sum().backward()
        thread = threading.Thread(target=lambda: zgrad.ones(2).exp())
        thread.start()
        thread.join(timeout=30)
    events = prof.events()
    cube = next(e for e in events if e.name == "Cube")
    decorated = next(e for e in events if e.name == "decorated")
    assert cube.depth == 1 and decorated.start_ns <= cube.start_ns
    assert "autograd::engine::evaluate_function: CubeBackward" in [e.name for e in events]
    exp = next(e for e in events if e.name == "zgrad::exp")
    assert exp.thread == thread.ident != decorated.thread


def test_schedule_records_the_active_steps_and_hands_each_cycle_over():
    cycles = []
    model, x = nn.Linear(3, 2), zgrad.randn(2, 3)
    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=2),
                 on_trace_ready=lambda p: cycles.append([e.name for e in p.events() if e.depth == 0])) as prof:
        for _ in range(10):
            model(x)
            prof.step()
    assert cycles == [["ProfilerStep#2", "ProfilerStep#3"], ["ProfilerStep#6", "ProfilerStep#7"]]
    assert [a.count for a in prof.key_averages() if a.key == "zgrad::linear"] == [2]


@pytest.mark.torch
@pytest.mark.parametrize("arguments", [dict(wait=1, warmup=1, active=2), dict(wait=0, warmup=0, active=1, repeat=3),
                                       dict(wait=2, warmup=1, active=3, repeat=1, skip_first=2),
                                       dict(wait=2, warmup=1, active=2, repeat=2, skip_first_wait=1)])
def test_schedule_actions_are_pytorchs(arguments):
    import torch.profiler

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        theirs = torch.profiler.schedule(**arguments)
        ours = schedule(**arguments)
    assert [str(w.message) for w in caught[:1]] == [str(w.message) for w in caught[1:]]
    assert [ours(step).name for step in range(24)] == [theirs(step).name for step in range(24)]
    assert ProfilerAction.RECORD_AND_SAVE.name == torch.profiler.ProfilerAction.RECORD_AND_SAVE.name


def test_table_and_chrome_trace(tmp_path):
    with profile(record_shapes=True) as prof:
        zgrad.ones(3, 4).exp().sum()
    table = prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total", row_limit=2)
    lines = table.splitlines()
    assert lines[1].split()[:4] == ["Name", "Self", "CPU", "%"] and "Input Shapes" in lines[1]
    assert len(lines) == 7 and lines[-1].startswith("Self CPU time total: ")
    with pytest.raises(AttributeError, match="has no attribute 'cpu_speed'"):
        prof.key_averages().table(sort_by="cpu_speed")
    prof.export_chrome_trace(tmp_path / "trace.json")
    trace = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert {"zgrad::exp", "zgrad::sum"} <= {e["name"] for e in trace} and all(e["ph"] == "X" for e in trace)


def test_autograd_profiler_reads_after_the_block():
    with zgrad.autograd.profiler.profile(record_shapes=True) as prof:
        with zgrad.autograd.profiler.record_function("block"):
            zgrad.randn(3, 3) @ zgrad.randn(3, 3)
        with pytest.raises(RuntimeError, match="Profiler didn't finish running"):
            prof.key_averages()
    keys = [a.key for a in prof.key_averages()]
    assert "block" in keys and any(k.startswith("zgrad::") for k in keys)
    assert "Self CPU time total" in str(prof) and prof.self_cpu_time_total > 0
    with zgrad.autograd.profiler.profile(enabled=False) as off:
        zgrad.ones(1) + 1
    assert off.function_events is None


def test_a_record_step_followed_by_none_drops_its_cycle_with_a_warning():
    actions = [ProfilerAction.RECORD, ProfilerAction.NONE, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE]
    ready = []
    with profile(schedule=lambda step: actions[step] if step < len(actions) else ProfilerAction.NONE,
                 on_trace_ready=lambda p: ready.append([e.name for e in p.events() if e.depth == 0])) as prof:
        for _ in range(5):
            zgrad.ones(2) + 1
            if prof.step_num == 0:
                with pytest.warns(UserWarning, match="Incorrect schedule: RECORD followed by NONE"):
                    prof.step()
            else:
                prof.step()
    assert ready == [["ProfilerStep#2", "ProfilerStep#3"]]
