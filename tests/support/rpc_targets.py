"""Functions and classes the RPC tests call remotely (allowed through [rpc] allowed_modules)."""

from __future__ import annotations

import dataclasses
import os
import threading
import time

import numpy as np

import zgrad
from zgrad.distributed import rpc
from zgrad.futures import Future


def add(a, b):
    return a + b


def echo(value):
    return value


def describe(value):
    """What the callee received: the type tree, shapes and requires_grad flags."""
    if isinstance(value, zgrad.Tensor):
        return ["tensor", list(value.shape), str(value.dtype), value.requires_grad]
    if isinstance(value, np.ndarray):
        return ["ndarray", list(value.shape), str(value.dtype)]
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [describe(v) for v in value]]
    if isinstance(value, dict):
        return ["dict", {k: describe(v) for k, v in value.items()}]
    return [type(value).__name__]


def device_of(tensor):
    """The device a received tensor landed on, as text."""
    return str(tensor.device)


def whoami():
    return rpc.get_worker_info().name


def chain(names, value):
    """Pass ``value + 1`` along the workers in ``names``; the last one returns the total."""
    if not names:
        return value
    return rpc.rpc_sync(names[0], chain, args=(names[1:], value + 1))


def ping_pong(depth, a, b):
    """Recursion that bounces between workers ``a`` and ``b``, ``depth`` calls deep."""
    if depth == 0:
        return 0
    me = rpc.get_worker_info().name
    other = b if me == a else a
    return 1 + rpc.rpc_sync(other, ping_pong, args=(depth - 1, a, b))


def raise_value_error(message):
    raise ValueError(message)


class CustomError(Exception):
    pass


def raise_custom():
    raise CustomError("custom failure")


def sleep_then(seconds, value):
    time.sleep(seconds)
    return value


class Gates:
    """Named events shared by the workers of this process (threads): a call can block until the
    test opens its gate, so a test does not sleep for a fixed time. Each wait is bounded."""

    _lock = threading.Lock()
    _events: dict[str, threading.Event] = {}

    @classmethod
    def get(cls, name):
        with cls._lock:
            return cls._events.setdefault(name, threading.Event())

    @classmethod
    def open(cls, name):
        cls.get(name).set()


def wait_at_gate(name, value, limit_s=20.0):
    """Return ``value`` once gate ``name`` is open (or after ``limit_s``)."""
    Gates.get(name).wait(limit_s)
    return value


def raise_via(names, message):
    """Pass the call along ``names``; the last one raises ValueError(message)."""
    if not names:
        raise ValueError(message)
    return rpc.rpc_sync(names[0], raise_via, args=(names[1:], message))


def unsendable():
    return threading.Lock()


def write_file(path):
    with open(path, "w") as f:
        f.write("ran")
    return True


def exit_process():
    os._exit(3)


class Counter:
    """A stateful object owned remotely behind an RRef."""

    def __init__(self, start=0):
        self.value = start
        self._lock = threading.Lock()

    def increment(self, by=1):
        with self._lock:
            self.value += by
            return self.value

    def get(self):
        return self.value

    def fail(self):
        raise KeyError("no such thing")


def make_rref_here(value):
    return rpc.RRef(value)


def rref_owner_and_value(rref):
    return [rref.owner_name(), rref.to_here()]


def rref_local_value(rref):
    return rref.local_value()


def relay_rref(names, rref):
    """Pass ``rref`` along ``names`` (a fork at each hop); the last one fetches it."""
    if not names:
        return [rpc.get_worker_info().name, rref.owner_name(), rref.to_here()]
    return rpc.rpc_sync(names[0], relay_rref, args=(names[1:], rref))


def rrefs_owned():
    return rpc.get_debug_info()["rrefs_owned"]


def tensor_sum(t):
    return float(t.numpy().sum())


# --- distributed autograd -----------------------------------------------------------------------

def mul(a, b):
    return a * b


def matmul_tanh(a, b):
    return (a @ b).tanh()


def nested_add(dst, a, b):
    """Forward ``a, b`` to ``dst`` for the addition and scale the result here."""
    return rpc.rpc_sync(dst, add, args=(a, b)) * 2.0


def chain_through(names, a, b):
    """a*b on the last of ``names``, passing through the others (each adds ``a``)."""
    if not names:
        return a * b
    return rpc.rpc_sync(names[0], chain_through, args=(names[1:], a, b)) + a


def call_back_home(home, a, b):
    """Call ``home`` (the caller) from inside an RPC: a round trip back."""
    return rpc.rpc_sync(home, mul, args=(a.exp(), b)) + a


def two_outputs(a, b):
    return (a * b, a + b)


def cast_to_float32(a):
    return a.float() * 3.0


def rref_to_here_sum(rref, other):
    return rref.to_here() * other


def fail_in_backward(a):
    return FailingBackward.apply(a)


class FailingBackward(zgrad.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("simulated error in backward")


def call_failing(dst, a):
    return rpc.rpc_sync(dst, fail_in_backward, args=(a,)) + 1.0


def dist_debug_info():
    from zgrad.distributed import autograd as dist_autograd

    return dist_autograd.get_debug_info()


class LinearStage:
    """A linear layer owned by one worker, used through RRefs. It seeds the process-wide random
    generator: with workers that share a process, create one stage at a time."""

    def __init__(self, in_features, out_features, seed):
        zgrad.manual_seed(seed)
        self.layer = zgrad.nn.Linear(in_features, out_features, dtype=np.float64)

    def forward(self, x):
        return self.layer(x).tanh()

    def parameter_rrefs(self):
        return [rpc.RRef(p) for p in self.layer.parameters()]

    def weights(self):
        return [p.numpy().copy() for p in self.layer.parameters()]


def stage_forward(rref, x):
    return rref.local_value().forward(x)


class SlowBackward(zgrad.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        time.sleep(3.0)
        return grad


def slow_in_backward(a):
    return SlowBackward.apply(a)


class BlockInBackward(zgrad.autograd.Function):
    """Identity whose backward creates the file ``marker`` and then blocks: the test kills this
    worker's process while the distributed backward pass waits on it."""

    @staticmethod
    def forward(ctx, x, marker):
        ctx.marker = marker
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        with open(ctx.marker, "w") as f:
            f.write("in backward")
        time.sleep(60.0)
        return grad, None


def block_in_backward(a, marker):
    return BlockInBackward.apply(a, marker)


def call_blocking(dst, a, marker):
    """``block_in_backward`` on ``dst``, one hop away from the caller."""
    return rpc.rpc_sync(dst, block_in_backward, args=(a, marker)) + 1.0


# --- PyTorch compatibility: functions and objects as values, async_execution, optimizers --------

def _call_method(method, rref, *args, **kwargs):
    """The helper of PyTorch's RPC examples: run ``method`` on the value ``rref`` holds."""
    return method(rref.local_value(), *args, **kwargs)


def apply(func, *args):
    return func(*args)


def make_adder(offset):
    """Returns a nested function: it has no name another worker could resolve."""
    def add_offset(x):
        return x + offset
    return add_offset


@dataclasses.dataclass
class Point:
    x: float
    y: float
    label: str = ""

    def norm(self):
        return (self.x ** 2 + self.y ** 2) ** 0.5


class Tracked:
    """Counts constructor runs: an object rebuilt by the codec must run none of its code."""

    constructed = 0

    def __init__(self, payload):
        Tracked.constructed += 1
        self.payload = payload

    def __reduce__(self):
        raise AssertionError("the pickle protocol must not be used")

    def __setstate__(self, state):
        raise AssertionError("__setstate__ must not run")


class Holder:
    def __init__(self, **attributes):
        self.__dict__.update(attributes)


class CustomNew:
    def __new__(cls):
        return super().__new__(cls)


def module_forward(module, x):
    return module(x)


def parameter_types(module):
    return [type(p).__name__ for p in module.parameters()]


def add_to_all(module, value):
    """Change ``module``'s parameters in place and return it (the caller gets the new values)."""
    for p in module.parameters():
        p.numpy()[...] += value
    return module


class BatchServer:
    """Answers ``size`` callers together, as PyTorch's batching parameter server does: each call's
    reply waits (async_execution) until the batch is full; no callee thread waits meanwhile."""

    def __init__(self, size):
        self.size = size
        self.lock = threading.Lock()
        self.pending = []
        self.future = Future()

    def _add(self, value):
        with self.lock:
            batch = self.future
            self.pending.append(value)
            if len(self.pending) == self.size:
                total, self.pending, self.future = sum(self.pending), [], Future()
            else:
                total = None
        if total is not None:
            batch.set_result(total)
        return batch.then(lambda done: [done.value(), value])

    @staticmethod
    @rpc.functions.async_execution
    def submit(server_rref, value):
        return server_rref.local_value()._add(value)

    @rpc.functions.async_execution
    def submit_method(self, value):
        return self._add(value)

    def waiting(self):
        with self.lock:
            return len(self.pending)

    @classmethod
    @rpc.functions.async_execution
    def doubled(cls, value):
        done = Future()
        done.set_result(value * 2)
        return done


def make_batch_server(size):
    return rpc.RRef(BatchServer(size))


def submit_to(server_rref, value):
    """A trainer's call to the batching server (its thread waits for the reply; the server's doesn't)."""
    return rpc.rpc_sync(server_rref.owner(), BatchServer.submit, args=(server_rref, value))


@rpc.functions.async_execution
def async_add_later(a, b, delay_s):
    done = Future()
    threading.Timer(delay_s, lambda: done.set_result(a + b)).start()
    return done


@rpc.functions.async_execution
def async_not_a_future():
    return 42


@rpc.functions.async_execution
def async_fails(message):
    done = Future()
    done.set_exception(ValueError(message))
    return done


def callee_tasks_in_flight():
    return rpc.get_debug_info()["callee_tasks_in_flight"]


class PlainSGD:
    """An optimizer written as a PyTorch user writes one: only ``__init__(params, lr)`` and
    ``step()``, reading ``.grad``."""

    def __init__(self, params, lr=0.1):
        self.params = list(params)
        self.lr = lr

    def step(self):
        for p in self.params:
            if p.grad is not None:
                p.numpy()[...] -= self.lr * p.grad.numpy()


class FailingConstructor:
    def __init__(self, message):
        raise ValueError(message)


def agent_settings():
    from zgrad.distributed.rpc.state import current_agent

    agent = current_agent()
    return [agent.config.rpc.num_worker_threads, agent.config.rpc.default_timeout_s]


# --- the message path (caller-direct sockets, leader/follower callees) ---------------------------

def spin_for(seconds):
    """Compute in Python (holding the GIL between switches) for ``seconds``; returns the loop count."""
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


def bounce(path, value, sleep_s=0.0):
    """Call along ``path`` (worker names; one may come again), each hop adding 1; the last hop
    sleeps ``sleep_s`` and returns the total."""
    if not path:
        time.sleep(sleep_s)
        return value
    return rpc.rpc_sync(path[0], bounce, args=(path[1:], value + 1, sleep_s))


def pass_rrefs_back(rrefs):
    """Hold ``rrefs`` (forks arrive here) and fetch their values; the forks go when this returns."""
    return [r.to_here() for r in rrefs]


def transport_stats():
    return rpc.get_debug_info()["transport"]


def remote_contexts(name):
    """The number of autograd contexts worker ``name`` holds (asked from here)."""
    return rpc.rpc_sync(name, dist_debug_info)["num_autograd_contexts"]


def role_handoffs():
    """How often this worker's I/O role was handed on by a thread about to block."""
    from zgrad.distributed.rpc.state import current_agent

    return current_agent().mesh._loop.role.handoffs


def call_gated(dst, gate, value):
    """From a handler, call ``dst`` and wait there at ``gate``."""
    return rpc.rpc_sync(dst, wait_at_gate, args=(gate, value))


def many_nested(dst, n):
    """From a handler, make ``n`` quick nested calls to ``dst`` in a row."""
    return sum(rpc.rpc_sync(dst, add, args=(i, 0)) for i in range(n))


KEPT = {}


def keep(key, value):
    """Hold ``value`` on this worker under ``key``."""
    KEPT[key] = value


def kept(key):
    return KEPT[key]


def direct_fan_out(names):
    """From a handler (this worker's leader): calls on this thread's own sockets to ``names``,
    one of them back to the caller, collected here."""
    from zgrad.distributed.rpc.state import current_agent

    agent = current_agent()
    calls = [agent.caller.start_call(name, add, args=(i, 10)) for i, name in enumerate(names)]
    return [value for value, _ in agent.caller.collect(calls)]


def has_kept(key):
    return key in KEPT


def keep_local_value(key, rref):
    """Hold the value of ``rref`` (owned here) under ``key``."""
    KEPT[key] = rref.local_value()


def kept_sum(key):
    return float(KEPT[key].sum())


def fill_kept(key, value):
    """Overwrite the held tensor in place."""
    KEPT[key]._data[...] = value
