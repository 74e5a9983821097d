"""Functions and classes the zgrad benchmarks call remotely (``[rpc] allowed_modules = ["_zg_targets"]``)."""

from __future__ import annotations

import zgrad
from zgrad import nn
from zgrad.distributed import rpc
import zgrad.distributed.autograd as dist_autograd


def echo(value):
    return value


def add(a, b):
    return a + b


def debug_counters():
    return dist_autograd.get_debug_info()


class Stage(nn.Module):
    def __init__(self, d_in, d_out, seed):
        super().__init__()
        zgrad.manual_seed(seed)
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return self.fc(x).relu()

    def parameter_rrefs(self):
        return [rpc.RRef(p) for p in self.parameters()]


def forward_stage(rref, x):
    return rref.local_value()(x)


class BatchServer:
    """The batching server of PyTorch's ``batch`` example, reduced to its RPC pattern: each call
    returns a future that completes when ``size`` calls have arrived; all get the batch's sum."""

    def __init__(self, size):
        import threading
        from zgrad.futures import Future

        self.size, self.lock, self.pending, self.future, self.Future = size, threading.Lock(), [], Future(), Future

    @staticmethod
    @rpc.functions.async_execution
    def submit(server_rref, x):
        self = server_rref.local_value()
        with self.lock:
            batch = self.future
            self.pending.append(x)
            full = len(self.pending) == self.size
            if full:
                total, self.pending, self.future = zgrad.stack(self.pending).sum(0), [], self.Future()
        if full:
            batch.set_result(total)
        return batch


def make_batch_server(size):
    """An RRef to a new BatchServer, owned here (as the batch example's server makes its own)."""
    return rpc.RRef(BatchServer(size))


def chain_add(names, a, b):
    """``a + b`` computed at the end of a chain of RPCs through ``names`` (one hop each); the
    result travels back through every hop, so the backward pass crosses them all again."""
    if not names:
        return a + b
    return rpc.rpc_sync(names[0], chain_add, args=(names[1:], a, b))


def cpu_seconds():
    """CPU time of this worker process so far (user + system, every thread)."""
    import time
    return time.process_time()

