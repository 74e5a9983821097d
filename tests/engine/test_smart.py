"""SMART mode of the distributed engine: discovery (DISCOVER / DISCOVER_ACK / START) and partial use.

Most tests run against the in-memory :class:`fake_world.World` (FIFO per pair of workers,
shuffled across pairs); every gradient is compared with local autograd on the same program
with the RPCs replaced by direct calls. The last tests run the same cases over real RPC.
See ``docs/smart-mode.md``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import rpc_targets as T
import zgrad
from fake_world import World
from rpc_harness import assert_settled, make_config, run_workers, settled_counters
from zgrad.distributed import autograd as dist_autograd
from zgrad.distributed import rpc
from zgrad.errors import AutogradError

SEEDS = range(8)


def leaves(*shapes, seed=0):
    zgrad.manual_seed(seed)
    return [zgrad.randn(*s, dtype=zgrad.float64, requires_grad=True) for s in shapes]


class Nested:
    """An ``rpc(dst, fn, *args)`` for a fake world that starts each call from the worker running
    the current function (so callees can call further, including back to earlier workers)."""

    def __init__(self, world: World, cid: int, home: int = 0) -> None:
        self.world, self.cid, self.stack = world, cid, [home]

    def __call__(self, dst, fn, *args):
        src = self.stack[-1]
        self.stack.append(dst)
        try:
            return self.world.rpc(self.cid, src, dst, fn, *args)
        finally:
            self.stack.pop()


def local_grads(program, tensors):
    copies = [zgrad.tensor(t.numpy(), requires_grad=True) for t in tensors]
    program(lambda dst, fn, *args: fn(*args), *copies).backward()
    return [None if c.grad is None else c.grad.numpy() for c in copies]


def assert_grads(got: dict, tensors, expected, rtol=1e-10):
    for t, e in zip(tensors, expected):
        if e is None:
            assert t not in got or not np.any(got[t]), "a leaf the roots do not reach got a gradient"
        else:
            assert t in got, "a leaf the roots reach got no gradient"
            np.testing.assert_allclose(got[t], e, rtol=rtol, atol=1e-12)


def finish(world: World, completion) -> None:
    world.deliver_all()
    assert completion.done(), "the pass did not complete once every message was delivered"


# --- random programs --------------------------------------------------------------------------

OPS = ("add", "mul", "tanh", "exp", "matmul")


def apply_op(op, x, y):
    if op == "add":
        return x + y
    # scaled so that values stay bounded however the ops are chained (no overflow)
    if op == "mul":
        return x * y.tanh()
    if op == "tanh":
        return x.tanh()
    if op == "exp":
        return x.tanh().exp() * 0.5
    return (x @ y.tanh()) * (1.0 / x.shape[-1])


@st.composite
def blocks(draw, worker, n_workers, depth, n_inputs, use_all=None):
    """A block run on ``worker``: ``(instructions, used)``. The pool starts with the inputs; each
    instruction appends one value: ``("op", name, i, j)`` or ``("rpc", dst, arg_indices, block)``."""
    if use_all is None:
        use_all = draw(st.booleans())  # every value used (FAST must succeed) or a random subset
    size = n_inputs
    instructions = []
    for _ in range(draw(st.integers(1, 4 if depth == 0 else 3))):
        if depth < 2 and draw(st.integers(0, 2)) > 0:
            dst = draw(st.sampled_from([w for w in range(n_workers) if w != worker]))
            args = draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=min(2, size)))
            instructions.append(("rpc", dst, args, draw(blocks(dst, n_workers, depth + 1, 1, use_all))))
        else:
            instructions.append(("op", draw(st.sampled_from(OPS)), draw(st.integers(0, size - 1)),
                                 draw(st.integers(0, size - 1))))
        size += 1
    used = [k for k in range(size) if use_all or draw(st.booleans())]  # RPC results among them or not
    if depth == 0 and not used:
        used = [size - 1]
    return instructions, used


def run_block(block, inputs, rpc, calls, worker):
    instructions, used = block
    pool = list(inputs)
    for ins in instructions:
        if ins[0] == "op":
            pool.append(apply_op(ins[1], pool[ins[2]], pool[ins[3]]))
        else:
            _, dst, args, sub = ins

            def callee(*received, _sub=sub, _dst=dst):
                # The callee always uses every argument, so its arguments' send takes part
                # exactly when its result does.
                combined = functools.reduce(lambda a, b: a + b, received)
                return run_block(_sub, [combined], rpc, calls, _dst)

            pool.append(rpc(worker, dst, callee, *[pool[i] for i in args]))
    return pool, used


def callee_result(pool, used):
    return functools.reduce(lambda a, b: a + b, [pool[0]] + [pool[k] for k in used])


def make_program(block):
    """``program(rpc, *leaves) -> loss`` where ``rpc(src, dst, fn, *args)``; callees return
    ``pool[0] + used values``, the root returns the sum of its used values' sums."""

    def program(rpc, calls, *tensors):
        def wrap_rpc(src, dst, fn, *args):
            def body(*received):
                pool, used = fn(*received)
                return callee_result(pool, used)
            return rpc(src, dst, body, *args)

        pool, used = run_block(block, tensors, wrap_rpc, calls, 0)
        return functools.reduce(lambda a, b: a + b, [pool[k].sum() for k in used])

    return program


def reference(program, tensors):
    """Local autograd of ``program``; also which RPC results the loss uses: ``[(src, dst, used)]``."""
    copies = [zgrad.tensor(t.numpy(), requires_grad=True) for t in tensors]
    calls = []

    def local_rpc(src, dst, fn, *args):
        out = fn(*args) * 1.0  # a node of its own, like the recv node of the result
        record = [src, dst, False]
        calls.append(record)
        out.register_hook(lambda g: record.__setitem__(2, True))
        return out

    program(local_rpc, calls, *copies).backward()
    return [None if c.grad is None else c.grad.numpy() for c in copies], calls


def run_fake(program, tensors, n_workers, seed, mode):
    world = World(n_workers, seed)
    cid = world.context(0)
    stack = [0]

    def fake_rpc(src, dst, fn, *args):
        assert stack[-1] == src
        stack.append(dst)
        try:
            return world.rpc(cid, src, dst, fn, *args)
        finally:
            stack.pop()

    loss = program(fake_rpc, [], *tensors)
    contexts = [len(c) for c in world.contexts]
    _, completion = world.backward(0, cid, [loss], mode=mode)
    finish(world, completion)
    assert world.passes_running() == [0] * n_workers
    assert [len(c) for c in world.contexts] == contexts
    return world, cid, completion


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), n_workers=st.integers(3, 4), k=st.sampled_from([2, 3]),
       seed=st.integers(0, 2**32 - 1))
def test_random_programs_smart_equals_local_autograd_and_fast_fails_cleanly(data, n_workers, k, seed):
    block = data.draw(blocks(0, n_workers, 0, 3), label="program")
    tensors = leaves((k, k), (k, k), (k, k), seed=seed % 1000)
    program = make_program(block)
    expected, calls = reference(program, tensors)
    used_calls = [c for c in calls if c[2]]
    event(f"rpcs={len(calls)} unused={len(calls) - len(used_calls)}")

    world, cid, completion = run_fake(program, tensors, n_workers, seed, "smart")
    completion.result()
    assert_grads(world.gradients(0, cid), tensors, expected)
    kinds = world.kinds()
    # One DISCOVER per cross-worker send in use (the result's and the arguments'); those for the
    # root ride in a DISCOVER_ACK, and each DISCOVER message is reported by one DISCOVER_ACK.
    assert world.discover_requests() == 2 * len(used_calls)
    assert kinds.count("DISCOVER_ACK") == kinds.count("DISCOVER")
    reached = {w for src, dst, _ in used_calls for w in (src, dst)} - {0}
    assert kinds.count("START") == len(reached)

    world, cid, completion = run_fake(program, tensors, n_workers, seed, "fast")
    assert not {"DISCOVER", "START"} & set(world.kinds())
    if len(used_calls) == len(calls):
        completion.result()
        assert_grads(world.gradients(0, cid), tensors, expected)
    else:
        with pytest.raises(AutogradError, match="never received a gradient"):
            completion.result()


# --- partial use --------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_two_rpcs_to_one_worker_backward_through_the_first_then_the_second(seed):
    a, b, c, d = leaves((3,), (3,), (3,), (3,), seed=seed)
    world = World(2, seed)
    cid = world.context(0)
    first = world.rpc(cid, 0, 1, zgrad.mul, a, b)
    second = world.rpc(cid, 0, 1, zgrad.add, c, d)
    _, completion = world.backward(0, cid, [first.sum()], mode="smart")
    finish(world, completion)
    completion.result()
    grads = world.gradients(0, cid)
    np.testing.assert_allclose(grads[a], b.numpy())
    np.testing.assert_allclose(grads[b], a.numpy())
    assert c not in grads and d not in grads, "the unused RPC's inputs must get no gradient"
    assert world.passes_running() == [0, 0]
    assert (world.discover_requests(), world.kinds().count("START")) == (2, 1)

    _, completion = world.backward(0, cid, [(second * 2.0).sum()], mode="smart")
    finish(world, completion)
    completion.result()
    grads = world.gradients(0, cid)
    np.testing.assert_allclose(grads[c], np.full(3, 2.0))
    np.testing.assert_allclose(grads[d], np.full(3, 2.0))
    np.testing.assert_allclose(grads[a], b.numpy())  # unchanged by the second pass
    assert world.passes_running() == [0, 0]


@pytest.mark.parametrize("seed", SEEDS)
def test_shared_inputs_partial_use_with_retain_graph_then_a_pass_that_uses_everything(seed):
    a, b = leaves((2, 2), (2, 2), seed=seed)
    world = World(2, seed)
    cid = world.context(0)
    u = world.rpc(cid, 0, 1, lambda x, y: (x @ y).tanh(), a, b)
    v = world.rpc(cid, 0, 1, zgrad.add, a, b)
    loss1 = u.sum()
    _, completion = world.backward(0, cid, [loss1], mode="smart", retain_graph=True)
    finish(world, completion)
    completion.result()
    loss2 = (u * v).sum()  # uses u again (its graph was retained) and v for the first time
    _, completion = world.backward(0, cid, [loss2], mode="smart")
    finish(world, completion)
    completion.result()
    expected = local_grads(lambda rpc, x, y: (x @ y).tanh().sum() + ((x @ y).tanh() * (x + y)).sum(), [a, b])
    assert_grads(world.gradients(0, cid), [a, b], expected)
    assert world.passes_running() == [0, 0]


def test_a_pass_after_a_failed_fast_pass_and_a_fast_pass_after_smart():
    a, b = leaves((4,), (4,))
    world = World(2)
    cid = world.context(0)
    u = world.rpc(cid, 0, 1, zgrad.mul, a, b)
    v = world.rpc(cid, 0, 1, zgrad.add, a, b)
    _, completion = world.backward(0, cid, [u.sum()], mode="smart", retain_graph=True)
    finish(world, completion)
    completion.result()
    _, completion = world.backward(0, cid, [(u + v).sum()], mode="fast")  # every result used now
    finish(world, completion)
    completion.result()
    grads = world.gradients(0, cid)
    np.testing.assert_allclose(grads[a], 2 * b.numpy() + 1.0)
    np.testing.assert_allclose(grads[b], 2 * a.numpy() + 1.0)


def ping_pong(rpc, a, b):
    # worker0 -> worker1 -> worker0 -> worker1
    def on_worker1_inner(x, y):
        return (x * y).tanh()

    def on_worker0(x, y):
        return rpc(1, on_worker1_inner, x.exp() * 0.5, y) + x

    def on_worker1(x, y):
        return rpc(0, on_worker0, x * y, y) * y

    return (rpc(1, on_worker1, a, b) + a).sum()


@pytest.mark.parametrize("mode", ["fast", "smart"])
@pytest.mark.parametrize("seed", SEEDS)
def test_ping_pong_between_two_workers(mode, seed):
    tensors = leaves((2, 3), (2, 3), seed=seed)
    world = World(2, seed)
    cid = world.context(0)
    loss = ping_pong(Nested(world, cid), *tensors)
    _, completion = world.backward(0, cid, [loss], mode=mode)
    finish(world, completion)
    completion.result()
    assert_grads(world.gradients(0, cid), tensors, local_grads(ping_pong, tensors))
    assert world.passes_running() == [0, 0]
    if mode == "smart":
        kinds = world.kinds()
        assert (world.discover_requests(), kinds.count("START")) == (6, 1)
        assert kinds.count("DISCOVER_ACK") == kinds.count("DISCOVER")


# --- discovery ----------------------------------------------------------------------------------

def nested_chain(rpc, a, b):
    return (rpc(1, lambda x, y: rpc(2, zgrad.mul, x, y) + x, a, b) * b).sum()


def fan_out(rpc, a, b):
    # three workers called directly by the root, one result unused, one callee calling another
    used1 = rpc(1, zgrad.mul, a, b)
    used2 = rpc(2, lambda x: rpc(3, lambda y: y.tanh(), x) * 2.0, a)
    rpc(3, zgrad.add, a, b)  # unused
    return (used1 + used2).sum()


def diamond_cycle(rpc, a, b):
    # worker1 and worker2 both call worker0 back; the loss uses both through one product.
    r1 = rpc(1, lambda x: rpc(0, lambda y: y * 3.0, x) + x, a)
    r2 = rpc(2, lambda x, y: rpc(0, zgrad.mul, x, y), a, b)
    return (r1 * r2).sum()


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("program, size, counts", [
    (nested_chain, 3, (4, 2)),
    (fan_out, 4, (6, 3)),
    (diamond_cycle, 3, (8, 2)),
], ids=["chain", "fan-out-with-unused", "calls-back-home"])
def test_discovery_message_counts(program, size, counts, seed):
    tensors = leaves((3,), (3,), seed=seed)
    world = World(size, seed)
    cid = world.context(0)
    loss = program(Nested(world, cid), *tensors)
    _, completion = world.backward(0, cid, [loss], mode="smart")
    finish(world, completion)
    completion.result()
    assert_grads(world.gradients(0, cid), tensors, local_grads(program, tensors))
    kinds = world.kinds()
    discovers, starts = counts
    assert world.discover_requests() == discovers
    assert kinds.count("DISCOVER_ACK") == kinds.count("DISCOVER") < discovers  # the root's ride in DISCOVER_ACKs
    assert kinds.count("START") == starts
    assert sum(e.smart.message_count() for e in world.engines) == 2 * kinds.count("DISCOVER") + starts
    assert world.passes_running() == [0] * size


@pytest.mark.parametrize("seed", SEEDS)
def test_root_runs_before_start_is_delivered(seed):
    """Execution does not wait for discovery: gradients flow while every START is held back, the
    nodes worker1 holds (two of its sends reach them) run once START comes, and the counts are
    right whichever of START and GRAD comes first."""
    tensors = leaves((3,), (3,), seed=seed)
    world = World(3, seed)
    cid = world.context(0)
    loss = nested_chain(Nested(world, cid), *tensors)
    _, completion = world.backward(0, cid, [loss], mode="smart")
    # deliver everything but START, as long as anything else is pending
    while True:
        pending = [pair for pair, queue in world.queues.items() if queue and queue[0][0] != "START"]
        if not pending:
            break
        src, dst = world.rng.choice(pending)
        kind, body, arrays = world.queues[(src, dst)].popleft()
        world.engines[dst].receive(src, kind, body, arrays)
    assert "GRAD" in world.kinds(), "the root must send gradients without waiting for START"
    assert not completion.done(), "worker1 holds nodes until START"
    finish(world, completion)
    completion.result()
    assert_grads(world.gradients(0, cid), tensors, local_grads(nested_chain, tensors))
    assert world.passes_running() == [0, 0, 0]


@pytest.mark.parametrize("seed", SEEDS)
def test_discover_for_an_unknown_send_fails_the_pass(seed):
    tensors = leaves((3,), (3,), seed=seed)
    world = World(3, seed)
    cid = world.context(0)
    loss = nested_chain(Nested(world, cid), *tensors)
    contexts = [len(c) for c in world.contexts]
    ctx2 = world.contexts[2].get(cid)
    (lost,) = list(ctx2.send_functions)
    del ctx2.send_functions[lost]  # worker2 forgot the send of its result
    _, completion = world.backward(0, cid, [loss], mode="smart")
    finish(world, completion)
    with pytest.raises(AutogradError, match=f"Error on Node 2: .*no send function with autograd_message_id {lost:#x}"):
        completion.result()
    assert world.passes_running() == [0, 0, 0]
    assert [len(c) for c in world.contexts] == contexts
    assert "FAILURE" in world.kinds()


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("steps", [0, 1, 2, 3])
def test_a_worker_dying_during_discovery_fails_the_pass(seed, steps):
    tensors = leaves((3,), (3,), seed=seed)
    world = World(3, seed)
    cid = world.context(0)
    loss = nested_chain(Nested(world, cid), *tensors)
    _, completion = world.backward(0, cid, [loss], mode="smart")
    for _ in range(steps):  # part of discovery, never all of it
        world.deliver_one()
    assert "START" not in world.kinds(), "discovery is not over yet"
    world.kill(2)
    finish(world, completion)
    with pytest.raises(AutogradError, match=r"'worker2'.*(unavailable|is dead)"):
        completion.result()
    assert world.passes_running()[:2] == [0, 0]
    assert [len(c) for c in world.contexts[:2]] == [1, 1]


def test_per_pass_state_is_freed_and_repeated_passes_accumulate():
    tensors = leaves((3,), (3,))
    world = World(3)
    cid = world.context(0)
    loss = nested_chain(Nested(world, cid), *tensors)
    for i in range(3):
        _, completion = world.backward(0, cid, [loss], mode="smart", retain_graph=True)
        finish(world, completion)
        completion.result()
        assert world.passes_running() == [0, 0, 0]
        for contexts in world.contexts:
            ctx = contexts.get(cid)
            assert ctx.passes == {} and len(ctx.ended_passes) == i + 1
    expected = local_grads(nested_chain, tensors)
    assert_grads(world.gradients(0, cid), tensors, [3 * e for e in expected])
    released = []
    world.engines[0].release_context(cid, lambda: released.append(True))
    world.deliver_all()
    assert released == [True] and [len(c) for c in world.contexts] == [0, 0, 0]


def test_smart_with_no_rpc_in_use_sends_nothing():
    a, b = leaves((3,), (3,))
    world = World(2)
    cid = world.context(0)
    world.rpc(cid, 0, 1, zgrad.mul, a, b)  # unused
    _, completion = world.backward(0, cid, [(a * b).sum()], mode="smart")
    assert completion.done(), "with nothing to discover the pass ends at once"
    completion.result()
    assert world.kinds() == []
    np.testing.assert_allclose(world.gradients(0, cid)[a], b.numpy())


# --- real RPC -----------------------------------------------------------------------------------

@pytest.mark.timeout(120)
def test_partial_use_over_real_rpc():
    def body(rank):
        if rank != 0:
            return None
        a, b, c, d = leaves((3,), (3,), (3,), (3,), seed=7)
        with dist_autograd.context() as cid:
            first = rpc.rpc_sync("worker1", T.mul, args=(a, b))
            second = rpc.rpc_sync("worker1", T.add, args=(c, d))
            dist_autograd.backward(cid, [first.sum()], mode="smart")
            grads = dist_autograd.get_gradients(cid)
            np.testing.assert_allclose(grads[a].numpy(), b.numpy())
            np.testing.assert_allclose(grads[b].numpy(), a.numpy())
            assert c not in grads and d not in grads
            dist_autograd.backward(cid, [(second * 3.0).sum()], mode="smart")
            grads = dist_autograd.get_gradients(cid)
            np.testing.assert_allclose(grads[c].numpy(), np.full(3, 3.0))
            np.testing.assert_allclose(grads[d].numpy(), np.full(3, 3.0))
            np.testing.assert_allclose(grads[a].numpy(), b.numpy())
        with dist_autograd.context() as cid:
            used = rpc.rpc_sync("worker1", T.mul, args=(a, b))
            rpc.rpc_sync("worker2", T.add, args=(a, b))  # unused
            nested = rpc.rpc_sync("worker1", T.nested_add, args=("worker2", a, c))
            rpc.rpc_sync("worker2", T.call_back_home, args=("worker0", a, b))  # unused, calls home
            dist_autograd.backward(cid, [used.sum()], mode="smart", retain_graph=True)
            dist_autograd.backward(cid, [(used * nested).sum()], mode="smart")
            grads = dist_autograd.get_gradients(cid)
            an, bn, cn = a.numpy(), b.numpy(), c.numpy()
            np.testing.assert_allclose(grads[a].numpy(), bn + bn * 2 * (an + cn) + an * bn * 2, rtol=1e-10)
            np.testing.assert_allclose(grads[b].numpy(), an + an * 2 * (an + cn), rtol=1e-10)
            np.testing.assert_allclose(grads[c].numpy(), an * bn * 2, rtol=1e-10)
        return settled_counters(3)

    counters = run_workers(3, make_config("inproc", 3), body)[0]
    assert_settled(counters)
    assert counters[0]["discovery_messages"] > 0
