"""The distributed engine against an in-memory fake messenger, with adversarial delivery orders.

Every gradient is compared with local autograd on the same program; every order delivers
messages FIFO per pair of workers (as the mesh does) and shuffles across pairs.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import zgrad
from fake_world import World
from zgrad.errors import AutogradError

SEEDS = range(12)


def leaves(*shapes, seed=0):
    zgrad.manual_seed(seed)
    return [zgrad.randn(*s, dtype=zgrad.float64, requires_grad=True) for s in shapes]


def local_grads(program, tensors):
    """Gradients of ``program`` run entirely locally (the reference)."""
    copies = [zgrad.tensor(t.numpy(), requires_grad=True) for t in tensors]
    program(lambda dst, fn, *args: fn(*args), *copies).backward()
    return [c.grad.numpy() for c in copies]


def run_world(program, tensors, world_size, seed, mode="fast"):
    world = World(world_size, seed)
    cid = world.context(0)
    loss = program(lambda dst, fn, *args: world.rpc(cid, 0, dst, fn, *args), *tensors)
    state, completion = world.backward(0, cid, [loss], mode=mode)
    world.deliver_all()
    assert completion.done(), "the pass did not complete once every message was delivered"
    completion.result()
    grads = world.gradients(0, cid)
    return world, cid, [grads[t] for t in tensors]


def design_note(rpc, t1, t2, t4):
    t3 = rpc(1, zgrad.add, t1, t2)
    return (t3 * t4).sum()


@pytest.mark.parametrize("mode", ["fast", "smart"])
@pytest.mark.parametrize("seed", SEEDS)
def test_design_note_example_matches_local_autograd(mode, seed):
    tensors = leaves((3, 3), (3, 3), (3, 3), seed=seed)
    world, _, got = run_world(design_note, tensors, 2, seed, mode)
    for g, expected in zip(got, local_grads(design_note, tensors)):
        np.testing.assert_allclose(g, expected, rtol=1e-12)
    assert world.passes_running() == [0, 0]


def nested_chain(rpc, a, b):
    # worker1 calls worker2 inside its function; the result comes back through both.
    def on_worker1(x, y):
        return rpc(2, lambda u, v: (u * v).tanh(), x, y) + x

    return (rpc(1, on_worker1, a, b) * b).sum()


def round_trip(rpc, a, b):
    # worker0 -> worker1 -> worker0 -> worker1 (ping-pong) with shared inputs.
    def back_home(x):
        return x.exp() * 0.5

    def on_worker1(x, y):
        return rpc(0, back_home, x * y) + y

    return rpc(1, on_worker1, a, b).sum() + (a * b).mean()


@pytest.mark.parametrize("mode", ["fast", "smart"])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("program, size", [(nested_chain, 3), (round_trip, 2)], ids=["nested", "ping-pong"])
def test_multi_hop_programs_match_local_autograd(program, size, mode, seed):
    tensors = leaves((2, 3), (2, 3), seed=seed)
    # In the fake world a nested rpc must start from the worker running the function.
    world = World(size, seed)
    cid = world.context(0)
    rpc = world.nested_rpc(cid)

    loss = program(rpc, *tensors)
    _, completion = world.backward(0, cid, [loss], mode=mode)
    world.deliver_all()
    assert completion.done()
    completion.result()
    grads = world.gradients(0, cid)
    for t, expected in zip(tensors, local_grads(program, tensors)):
        np.testing.assert_allclose(grads[t], expected, rtol=1e-10)
    assert world.passes_running() == [0] * size


def unused_result(rpc, a, b):
    used = rpc(1, zgrad.mul, a, b)
    rpc(1, zgrad.add, a, b)  # result never used by the loss
    return used.sum()


@pytest.mark.parametrize("seed", SEEDS)
def test_fast_mode_names_the_sends_that_never_got_a_gradient(seed):
    tensors = leaves((4,), (4,), seed=seed)
    world = World(2, seed)
    cid = world.context(0)
    loss = unused_result(lambda dst, fn, *args: world.rpc(cid, 0, dst, fn, *args), *tensors)
    _, completion = world.backward(0, cid, [loss], mode="fast", retain_graph=True)
    world.deliver_all()
    assert completion.done(), "FAST mode must not hang on an unused RPC result"
    with pytest.raises(AutogradError) as info:
        completion.result()
    message = str(info.value)
    assert "never received a gradient" in message and 'mode="smart"' in message
    # both sends of the unused RPC: its arguments' on worker0 and its result's on worker1
    assert "2 send function(s)" in message and "on 'worker0' (RPC with 'worker1')" in message \
        and "on 'worker1' (RPC with 'worker0')" in message
    assert "PASS_END" in world.kinds(), "worker1 still holds the pass: the root asks for the exact verdict"
    assert world.passes_running() == [0, 0]
    # SMART on the same context gives the exact gradients.
    _, completion = world.backward(0, cid, [loss], mode="smart")
    world.deliver_all()
    completion.result()
    grads = world.gradients(0, cid)
    for t, expected in zip(tensors, local_grads(unused_result, tensors)):
        # the failed FAST pass accumulated nothing for a (its send never ran): SMART's is exact
        np.testing.assert_allclose(grads[t], expected, rtol=1e-12)


def test_smart_discovery_messages_are_one_discover_per_edge_plus_start():
    tensors = leaves((3, 3), (3, 3), (3, 3))
    world, _, _ = run_world(design_note, tensors, 2, seed=0, mode="smart")
    kinds = world.kinds()
    # root -> worker1's result send (a message); worker1 -> root's argument send (in worker1's
    # DISCOVER_ACK); one START to worker1, sent once the pass is over (it holds no node).
    assert kinds.count("DISCOVER") == 1 and kinds.count("DISCOVER_ACK") == 1 and kinds.count("START") == 1
    assert world.discover_requests() == 2
    assert kinds.index("START") > kinds.index("GRAD_ACK")


def test_an_error_on_a_remote_node_reaches_the_root_and_frees_every_pass():
    class Boom(zgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            raise ValueError("exploded in backward")

    tensors = leaves((3,), (3,))
    world = World(3)
    cid = world.context(0)
    rpc = world.nested_rpc(cid)

    loss = rpc(1, lambda a, b: rpc(2, lambda x: Boom.apply(x), a) + b, *tensors).sum()
    _, completion = world.backward(0, cid, [loss])
    world.deliver_all()
    assert completion.done()
    with pytest.raises(AutogradError, match="Error on Node 2: ValueError: exploded in backward"):
        completion.result()
    assert world.passes_running() == [0, 0, 0]
    assert "FAILURE" in world.kinds()


def test_a_worker_dying_mid_pass_fails_the_pass():
    tensors = leaves((3,), (3,), (3,))
    world = World(2)
    cid = world.context(0)
    loss = design_note(lambda dst, fn, *args: world.rpc(cid, 0, dst, fn, *args), *tensors)
    _, completion = world.backward(0, cid, [loss])
    assert not completion.done()
    world.kill(1)
    world.deliver_all()
    assert completion.done()
    with pytest.raises(AutogradError, match="'worker1' \\(rank 1\\) is unavailable"):
        completion.result()


def test_release_reaches_every_worker_and_late_messages_do_not_revive_the_context():
    tensors = leaves((3,), (3,))
    world = World(3)
    cid = world.context(0)
    rpc = world.nested_rpc(cid)

    rpc(1, lambda a, b: rpc(2, zgrad.mul, a, b), *tensors)  # worker2 is known only to worker1
    released = []
    world.engines[0].release_context(cid, lambda: released.append(True))
    world.deliver_all()
    assert released == [True]
    assert [len(c) for c in world.contexts] == [0, 0, 0]
    with pytest.raises(AutogradError, match="already released"):
        world.contexts[2].get_or_create(cid)
    with pytest.raises(AutogradError, match="Could not find autograd context with id"):
        world.contexts[1].get(cid)


def test_repeated_passes_accumulate_and_a_concurrent_second_pass_is_refused():
    tensors = leaves((3, 3), (3, 3), (3, 3))
    world = World(2)
    cid = world.context(0)
    loss = design_note(lambda dst, fn, *args: world.rpc(cid, 0, dst, fn, *args), *tensors)
    _, first = world.backward(0, cid, [loss], retain_graph=True)
    with pytest.raises(AutogradError, match="already running"):
        world.backward(0, cid, [loss], retain_graph=True)
    world.deliver_all()
    first.result()
    _, second = world.backward(0, cid, [loss])
    world.deliver_all()
    second.result()
    expected = local_grads(design_note, tensors)
    grads = world.gradients(0, cid)
    for t, e in zip(tensors, expected):
        np.testing.assert_allclose(grads[t], 2 * e, rtol=1e-12)


def test_release_is_retried_when_a_send_fails_and_given_up_on_a_lost_worker():
    tensors = leaves((3,), (3,))
    world = World(3)
    cid = world.context(0)
    world.rpc(cid, 0, 1, zgrad.mul, *tensors)
    world.rpc(cid, 0, 2, zgrad.add, *tensors)
    messenger = world.engines[0].messenger
    original, failures = messenger.send, {"left": 2}

    def flaky(dst, kind, body, arrays=()):
        if kind == "CONTEXT_RELEASE" and dst == 1 and failures["left"]:
            failures["left"] -= 1
            raise TimeoutError("send queue full")
        return original(dst, kind, body, arrays)

    messenger.send = flaky
    world.kill(2)
    released = []
    world.engines[0].release_context(cid, lambda: released.append(True))
    world.deliver_all()
    assert released == [True] and failures["left"] == 0
    assert len(world.contexts[1]) == 0


# --- completion and clean-up ----------------------------------------------------------------------

def deliver_until_done(world, completion):
    """Deliver messages one at a time (in the world's random order) until the pass completes."""
    while not completion.done():
        assert world.deliver_one(), "the pass did not complete once every message was delivered"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("program, size", [(design_note, 2), (nested_chain, 3), (round_trip, 2)],
                         ids=["design-note", "nested", "ping-pong"])
def test_a_fast_pass_is_over_everywhere_when_backward_returns(program, size, seed):
    """Every task reports straight to the root, each worker closes the pass itself when its last
    task ends: when the root completes, no worker holds the pass, and nothing more is sent."""
    tensors = leaves(*[(2, 3)] * (3 if program is design_note else 2), seed=seed)
    world = World(size, seed)
    cid = world.context(0)
    loss = program(world.nested_rpc(cid), *tensors)
    _, completion = world.backward(0, cid, [loss])
    deliver_until_done(world, completion)
    completion.result()
    assert world.passes_running() == [0] * size
    assert world.deliver_all() == 0, "nothing is left to send once the pass completed"
    kinds = world.kinds()
    assert "PASS_END" not in kinds
    # one report per GRAD that went to a worker other than the root (the root's own are local)
    assert kinds.count("GRAD_ACK") == sum(1 for _, dst, kind, _ in world.log if kind == "GRAD" and dst != 0)
    if program is design_note:  # worker1's GRAD for the root is its run's last act: it rides in the report
        assert kinds == ["GRAD", "GRAD_ACK"] and [g[2] for g in world.bodies("GRAD_ACK")[0]["grads"]] == [2]
    grads = world.gradients(0, cid)
    for t, expected in zip(tensors, local_grads(program, tensors)):
        np.testing.assert_allclose(grads[t], expected, rtol=1e-10)


def two_results_used(rpc, a, b):
    return (rpc(1, zgrad.mul, a, b) * rpc(1, zgrad.add, a, b)).sum()


@pytest.mark.parametrize("seed", SEEDS)
def test_a_report_that_the_pass_is_open_is_superseded_by_the_one_that_closes_it(seed):
    """worker1 gets the gradients of its two result sends in two tasks: the first ends with the
    other send still waiting (open), the second closes the pass. The pass succeeds without
    PASS_END: the root combines a worker's reports with AND."""
    tensors = leaves((4,), (4,), seed=seed)
    world = World(2, seed)
    cid = world.context(0)
    loss = two_results_used(world.nested_rpc(cid), *tensors)
    _, completion = world.backward(0, cid, [loss])
    world.deliver_all()
    completion.result()
    assert [b["open"] for b in world.bodies("GRAD_ACK")] == [True, False]
    assert "PASS_END" not in world.kinds()
    assert world.passes_running() == [0, 0]
    grads = world.gradients(0, cid)
    for t, expected in zip(tensors, local_grads(two_results_used, tensors)):
        np.testing.assert_allclose(grads[t], expected, rtol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mode", ["fast", "smart"])
def test_back_to_back_passes_in_one_context(mode, seed):
    """A pass starts as soon as the previous one completed, with the previous one's clean-up
    (SMART's START) still in flight: a worker that meets the newer pass of the same root first
    forgets the older one. Gradients accumulate; every worker ends both passes."""
    tensors = leaves((3,), (3,), seed=seed)
    world = World(3, seed)
    cid = world.context(0)
    loss = nested_chain(world.nested_rpc(cid), *tensors)
    states = []
    for retain in (True, True, False):
        state, completion = world.backward(0, cid, [loss], mode=mode, retain_graph=retain)
        deliver_until_done(world, completion)
        completion.result()
        states.append(state)
    world.deliver_all()
    assert world.passes_running() == [0, 0, 0]
    for contexts in world.contexts[1:]:
        assert {s.pass_id for s in states} <= contexts.get(cid).ended_passes
    grads = world.gradients(0, cid)
    for t, expected in zip(tensors, local_grads(nested_chain, tensors)):
        np.testing.assert_allclose(grads[t], 3 * expected, rtol=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_release_racing_late_messages_of_a_pass(seed):
    """The context is released while a pass's clean-up (START) is still in flight and a GRAD of
    an old pass arrives late: nothing revives the context, nothing fails, every counter is 0."""
    tensors = leaves((3,), (3,), seed=seed)
    world = World(3, seed)
    cid = world.context(0)
    loss = nested_chain(world.nested_rpc(cid), *tensors)
    state, completion = world.backward(0, cid, [loss], mode="smart")
    deliver_until_done(world, completion)
    completion.result()
    late_grad = [("GRAD", {"ctx": cid, "pass": state.pass_id, "msg": 0x7, "root": 0, "retain": False,
                           "mode": "smart", "task": 12345}, [np.ones(3)])]
    world.queues.setdefault((0, 2), __import__("collections").deque()).extend(late_grad)
    released = []
    world.engines[0].release_context(cid, lambda: released.append(True))
    world.deliver_all()
    assert released == [True]
    assert [len(c) for c in world.contexts] == [0, 0, 0]
    assert world.passes_running() == [0, 0, 0]
    for contexts in world.contexts:
        with pytest.raises(AutogradError, match="already released"):
            contexts.get_or_create(cid)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("when", ["before", "after"])
def test_a_worker_lost_while_a_task_announced_to_it_runs(when, seed):
    """root -> worker1 -> worker2: worker2 dies before or after the root learned (from worker1's
    report) of the task worker1 started there. Either way the pass fails naming worker2."""
    tensors = leaves((3,), (3,), seed=seed)
    world = World(3, seed)
    cid = world.context(0)
    loss = nested_chain(world.nested_rpc(cid), *tensors)
    _, completion = world.backward(0, cid, [loss])
    root = world.engines[0]
    # deliver until worker1 has sent its GRAD to worker2 (and, "after", its report reached the root)
    while not any(src == 1 and dst == 2 and kind == "GRAD" for src, dst, kind, _ in world.log):
        assert world.deliver_one()
    if when == "after":
        while world.queues.get((1, 0)):
            kind, body, arrays = world.queues[(1, 0)].popleft()
            root.receive(1, kind, body, arrays)
    world.kill(2)
    world.deliver_all()
    assert completion.done()
    with pytest.raises(AutogradError, match="'worker2' \\(rank 2\\) is unavailable"):
        completion.result()
    assert world.passes_running()[:2] == [0, 0]


# --- leaf gradients handed to the context ---------------------------------------------------------

def test_the_context_keeps_a_gradient_nothing_else_holds_and_copies_the_others():
    """The graph task gives the context the array itself when nothing else holds it or its
    memory (PyTorch steals such gradients too), and a copy otherwise: the same array going to two
    leaves, a read-only broadcast view, a view of an array someone keeps, a read-only receive
    buffer. Whatever was kept or copied, gradients never alias each other or anything else."""
    import weakref

    from zgrad.engine.dist.context import ContextContainer
    from zgrad.engine.graph import Edge
    from zgrad.engine.graph_task import GraphTask

    made = []
    kept_elsewhere = np.full((2, 2), 7.0)

    class Returns(zgrad.autograd.Function):
        """Identity whose backward returns ``make(grad)``; remembers (weakly) what it returned."""

        @staticmethod
        def forward(ctx, x, make):
            ctx.make = make
            return x * 1.0

        @staticmethod
        def backward(ctx, grad):
            out = ctx.make(grad)
            made.append(weakref.ref(out))
            return out, None

    def one_pass(make):
        made.clear()
        ctx = ContextContainer(0).create()
        x = zgrad.tensor(np.ones((2, 2)), requires_grad=True)
        task = GraphTask(leaf_sink=ctx.accumulate_grad, sink_keeps=True)
        task.start([Edge(Returns.apply(x, make).sum().grad_fn, 0)], [np.array(1.0)])
        task.run()
        return ctx.gradients()[x], made[0]()

    got, returned = one_pass(lambda g: np.array(g) * 3.0)  # a fresh array only the task holds
    assert got is returned
    receive_buffer = bytearray(np.full((2, 2), 5.0).tobytes())
    got, returned = one_pass(lambda g: np.frombuffer(memoryview(receive_buffer), dtype=np.float64).reshape(2, 2))
    assert got is returned, "an array over a receive buffer nobody else views is kept"
    del returned
    for make in (lambda g: kept_elsewhere[:, :],  # a view of an array someone keeps
                 lambda g: np.broadcast_to(np.float64(2.0), (2, 2)),  # read-only
                 lambda g: np.frombuffer(np.full((2, 2), 4.0).tobytes(), dtype=np.float64).reshape(2, 2)):
        got, returned = one_pass(make)
        assert got is not returned and not np.shares_memory(got, kept_elsewhere)
        got += 1.0  # the context's gradient is its own: later passes add into it in place
    np.testing.assert_array_equal(kept_elsewhere, np.full((2, 2), 7.0))

    # One array routed to two leaves (AddBackward): the first leaf gets a copy, the second the array.
    ctx = ContextContainer(0).create()
    a, b = (zgrad.tensor(np.ones(3), requires_grad=True) for _ in range(2))
    task = GraphTask(leaf_sink=ctx.accumulate_grad, sink_keeps=True)
    task.start([Edge(((a + b) * 2.0).sum().grad_fn, 0)], [np.array(1.0)])
    task.run()
    grads = ctx.gradients()
    assert not np.shares_memory(grads[a], grads[b])
    grads[a] += 1.0
    np.testing.assert_array_equal(grads[b], np.full(3, 2.0))


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_repeated_passes_accumulate_into_kept_gradients_exactly(seed):
    """Kept gradients are added into in place by later passes: the sums stay exact, and the
    arrays that arrived in messages are not disturbed by it."""
    tensors = leaves((3, 3), (3, 3), (3, 3), seed=seed)
    world = World(2, seed)
    cid = world.context(0)
    loss = design_note(lambda dst, fn, *args: world.rpc(cid, 0, dst, fn, *args), *tensors)
    for retain in (True, True, False):
        _, completion = world.backward(0, cid, [loss], retain_graph=retain)
        world.deliver_all()
        completion.result()
    grads = world.gradients(0, cid)
    for t, expected in zip(tensors, local_grads(design_note, tensors)):
        np.testing.assert_allclose(grads[t], 3 * expected, rtol=1e-12)


def test_a_handler_that_crashes_fails_the_pass_at_once():
    """An unexpected exception while handling a GRAD (an engine bug) is reported to the root,
    which fails the pass instead of waiting for backward_timeout_s."""
    tensors = leaves((3,), (3,), (3,))
    world = World(2)
    cid = world.context(0)
    loss = design_note(lambda dst, fn, *args: world.rpc(cid, 0, dst, fn, *args), *tensors)

    def crash(*_args):
        raise KeyError("simulated engine bug")

    world.engines[1]._handlers["GRAD"] = crash
    _, completion = world.backward(0, cid, [loss])
    world.deliver_all()
    assert completion.done()
    with pytest.raises(AutogradError, match="Error on Node 1: KeyError: 'simulated engine bug'"):
        completion.result()
    assert world.passes_running() == [0, 0]


@pytest.mark.parametrize("field, value", [("children", [[1, 2]]), ("children", [["a", 1, 2]]), ("grads", [[5, 6, 3]]),
                                          ("grads", [[5, 6, -1]]), ("discover", [[1, 2, 3]])])
def test_a_malformed_report_is_refused_before_it_counts(field, value):
    """Reports are checked before the root's tracker counts them (never assert on peer input)."""
    from zgrad.errors import ProtocolError

    tensors = leaves((3,), (3,), (3,))
    world = World(2)
    cid = world.context(0)
    loss = design_note(lambda dst, fn, *args: world.rpc(cid, 0, dst, fn, *args), *tensors)
    state, completion = world.backward(0, cid, [loss])
    body = {"ctx": cid, "pass": state.pass_id, "task": 99, "children": [], "error": None, "open": False, field: value}
    with pytest.raises(ProtocolError, match=field):
        world.engines[0].roots.on_report(1, "GRAD_ACK", body, [np.ones(3)])
    world.deliver_all()  # the pass itself is untouched
    completion.result()


# --- the root's waiting -------------------------------------------------------------------------

def test_completion_runs_posted_work_on_the_waiter_and_hands_back_what_is_left():

    from zgrad.engine.dist.passes import Completion, Gate

    completion = Completion(caller_runs_work=True)
    ran = []
    assert completion.post(lambda: ran.append(threading.current_thread().name))
    assert completion.wait(0.05) is False, "not done yet: the wait times out after running the work"
    assert ran == [threading.current_thread().name]
    threading.Timer(0.05, lambda: completion.post(lambda: ran.append("second"))).start()
    threading.Timer(0.1, lambda: completion.set_done(AutogradError("boom"))).start()
    assert completion.wait(5.0) is True
    assert ran[1:] == ["second"]
    assert completion.set_done(None) is False, "the first outcome stays"
    assert completion.wait(0.0) is True, "done stays done"
    completion.post(lambda: ran.append("late"))
    left = completion.stop_accepting()
    assert [w() for w in left] and ran[-1] == "late", "work queued after the outcome is handed back"
    assert completion.post(lambda: None) is False
    with pytest.raises(AutogradError, match="boom"):
        completion.result()
    assert Completion().post(lambda: None) is False, "without caller_runs_work nobody runs posted work"

    gate, passed = Gate(), []
    assert gate.wait(0.01) is False, "a closed gate times out"
    waiters = [threading.Thread(target=lambda: (gate.wait(5.0), passed.append(1))) for _ in range(3)]
    for t in waiters:
        t.start()
    time.sleep(0.05)
    assert passed == [], "a closed gate holds its waiters"
    gate.open()
    gate.open()  # opening twice is harmless
    for t in waiters:
        t.join(5.0)
    assert passed == [1, 1, 1]
    assert gate.wait(0.0) is True, "an open gate does not block"
