"""The distributed engine against an in-memory fake messenger, with adversarial delivery orders.

Every gradient is compared with local autograd on the same program; every order delivers
messages FIFO per pair of workers (as the mesh does) and shuffles across pairs.
"""

from __future__ import annotations

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
    assert world.passes_running() == [0, 0]
    # SMART on the same context gives the exact gradients.
    _, completion = world.backward(0, cid, [loss], mode="smart")
    world.deliver_all()
    completion.result()
    grads = world.gradients(0, cid)
    for t, expected in zip(tensors, local_grads(unused_result, tensors)):
        # the failed FAST pass accumulated nothing for a (its send never ran): SMART's is exact
        np.testing.assert_allclose(grads[t], expected, rtol=1e-12)


def test_smart_discovery_messages_are_one_discover_and_ack_per_edge_plus_start():
    tensors = leaves((3, 3), (3, 3), (3, 3))
    world, _, _ = run_world(design_note, tensors, 2, seed=0, mode="smart")
    kinds = world.kinds()
    # root -> worker1's result send, worker1 -> root's argument send; one START to worker1.
    assert kinds.count("DISCOVER") == 2 and kinds.count("DISCOVER_ACK") == 2 and kinds.count("START") == 1


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
