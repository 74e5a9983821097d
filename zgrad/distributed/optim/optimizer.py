"""``DistributedOptimizer``: one local optimizer per parameter owner, stepped with a context's gradients."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any, Sequence

from zgrad.distributed import autograd as dist_autograd
from zgrad.distributed import rpc
from zgrad.distributed.rpc.state import current_agent
from zgrad.distributed.rpc.targets import resolve_target, target_name
from zgrad.optim import Optimizer

__all__ = ["DistributedOptimizer", "LocalOptimizer", "local_step"]


class LocalOptimizer:
    """The optimizer living on a parameter owner (created there over RPC)."""

    # Steps of every local optimizer of this process are serialized, so two optimizers over the
    # same parameters never interleave their updates.
    step_lock = threading.Lock()

    def __init__(self, optimizer_target: str, param_rrefs: Sequence[rpc.RRef], args: list, kwargs: dict) -> None:
        agent = current_agent()
        optimizer_class = resolve_target(optimizer_target, agent.config.rpc.allowed_modules, agent.name)
        self.params = [rref.local_value() for rref in param_rrefs]
        self.optimizer = optimizer_class(self.params, *args, **kwargs)

    def step(self, context_id: int) -> None:
        """Apply this worker's gradients of ``context_id`` to its parameters (others unchanged).

        zgrad's own optimizers take the gradients directly (their fused update). Any other
        optimizer class, one that only has ``__init__(params, **kwargs)`` and ``step()`` as in
        PyTorch, gets each parameter's ``.grad`` set to the context's gradient (None where the
        context has none) for the duration of its ``step()``; the previous ``.grad`` values are
        put back afterwards, so the distributed pass never leaks into ``.grad``.
        """
        gradients = dist_autograd.get_gradients(context_id)
        with LocalOptimizer.step_lock:
            if _takes_gradients(self.optimizer):
                self.optimizer.step_with_gradients(gradients)
                return
            previous = [param.grad for param in self.params]
            try:
                for param in self.params:
                    param.grad = gradients.get(param)
                self.optimizer.step()
            finally:
                for param, grad in zip(self.params, previous):
                    param.grad = grad


def _takes_gradients(optimizer: Any) -> bool:
    """Whether ``optimizer`` is one of zgrad's, stepping from explicit gradients; a subclass that
    overrides ``step`` is treated as foreign, so its own ``step`` runs."""
    return isinstance(optimizer, Optimizer) and type(optimizer).step is Optimizer.step


def local_step(optimizer_rref: rpc.RRef, context_id: int) -> None:
    """RPC target: step the owner's local optimizer."""
    optimizer_rref.local_value().step(context_id)


class DistributedOptimizer:
    """Optimizes parameters spread over workers, given RRefs to them.

    Groups the RRefs by owner and creates one ``optimizer_class(params, *args, **kwargs)`` on each
    owner. :meth:`step` makes every owner apply the gradients of a distributed autograd context,
    concurrently, and returns when all are done.

    Raises:
        RemoteError: the optimizer's constructor failed on an owner (from ``__init__``).

    Example::

        opt = DistributedOptimizer(zgrad.optim.SGD, param_rrefs, lr=0.05)
        with dist_autograd.context() as context_id:
            loss = model(x)
            dist_autograd.backward(context_id, [loss])
            opt.step(context_id)
    """

    def __init__(self, optimizer_class: type, params_rref: Sequence[rpc.RRef], *args: Any, **kwargs: Any) -> None:
        if not params_rref:
            raise ValueError("DistributedOptimizer got an empty list of parameter RRefs")
        by_owner: dict[int, list[rpc.RRef]] = defaultdict(list)
        for i, rref in enumerate(params_rref):
            if not isinstance(rref, rpc.RRef):
                raise TypeError(f"params_rref must hold RRefs; entry {i} is a {type(rref).__name__}")
            by_owner[rref.owner().id].append(rref)
        target = target_name(optimizer_class)
        self.remote_optimizers = [
            rpc.remote(owner, LocalOptimizer, args=(target, rrefs, list(args), kwargs)) for owner, rrefs in by_owner.items()
        ]
        for optimizer in self.remote_optimizers:
            optimizer._get_future().wait()

    def step(self, context_id: int) -> None:
        """Step every owner's optimizer with the gradients of ``context_id``. Blocks until all are done.

        The optimizer owned by this worker (if any) steps on the calling thread while the calls to
        the other owners are in flight: a call to oneself would only add a round trip. Those
        calls leave from the calling thread's own sockets and it collects their replies there
        (``Caller.start_call`` and ``Caller.collect``): no hand-off to the I/O thread on this side.

        Raises:
            RemoteError: another owner's step failed; the error itself if this worker's failed
                (the first error, after all have finished).
        """
        agent = current_agent()
        me = agent.rank
        calls = [agent.caller.start_call(opt.owner(), local_step, args=(opt, context_id))
                 for opt in self.remote_optimizers if opt.owner().id != me]
        errors = []
        for opt in self.remote_optimizers:
            if opt.owner().id == me:
                try:
                    opt.local_value().step(context_id)
                except Exception as exc:  # noqa: BLE001 - raised below, after every owner finished
                    errors.append(exc)
        errors += [error for _, error in agent.caller.collect(calls) if error is not None]
        if errors:
            raise errors[0]
