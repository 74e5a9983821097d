"""``DistributedDataParallel.join()``: ranks with fewer batches finish while the others go on.

Inside the ``with`` block every forward through DDP tells the group this rank is still
training (an all-reduce of 1; a joined rank contributes 0). A rank that leaves the block has
*joined*: until every rank has, it keeps answering the others' collectives of each iteration
with zeros ("shadowing": the bucket rebuild, buffer broadcast, sync flag, every gradient bucket
and the used-parameter map), so they neither hang nor get anything but their own gradients,
divided by the initial world size (or, with ``divide_by_initial_world_size=False``, by the
number of ranks still training). When all have joined, the last to join broadcasts its model
(the one that saw every batch) to the others. This follows PyTorch's ``Join`` and DDP's join hooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from zgrad.distributed.collectives import ops
from zgrad.distributed.collectives.fingerprint import ReduceOp
from zgrad.errors import ZgradError

if TYPE_CHECKING:
    from zgrad.nn.parallel.distributed import DistributedDataParallel

__all__ = ["Join", "JoinConfig", "notify_join_context"]


@dataclass(frozen=True)
class JoinConfig:
    enable: bool
    throw_on_early_termination: bool
    divide_by_initial_world_size: bool


def _all_reduce_scalar(ddp: "DistributedDataParallel", value: float, op: ReduceOp = ReduceOp.SUM,
                       async_op: bool = False) -> Any:
    array = np.array([value], np.float32)
    work = ops.all_reduce(ddp.process_group, array, op, async_op, [array], label="ddp_join")
    return (work, array) if async_op else float(array[0])


def notify_join_context(ddp: "DistributedDataParallel") -> None:
    """A forward inside ``join()`` on a rank still training: count it among the non-joined ranks.

    Raises:
        ZgradError: with ``throw_on_early_termination``, "Detected at least one rank that exhausted
            inputs. Throwing across all ranks." once some rank has joined.
    """
    config = ddp.join_config
    if config is None or not config.enable:
        return
    work, count = _all_reduce_scalar(ddp, 1.0, async_op=True)
    if config.throw_on_early_termination and _all_reduce_scalar(ddp, 0.0):
        raise ZgradError("Detected at least one rank that exhausted inputs. Throwing across all ranks.")
    if not config.divide_by_initial_world_size:
        def learn_divisor() -> None:
            work.wait()
            ddp.reducer.divide_by = int(count[0])
        ddp.reducer.before_first_hook = learn_divisor


def check_global_requires_backward_grad_sync(ddp: "DistributedDataParallel", joined: bool) -> bool:
    """Whether the ranks still training sync gradients this iteration (they say so; joined ranks
    ask). A collective of every iteration inside ``join()``."""
    value = 0.0 if joined or not ddp.require_backward_grad_sync else 1.0
    return _all_reduce_scalar(ddp, value) > 0


class Join:
    """The context manager ``ddp.join()`` returns (see the module docstring).

    Blocks in ``__exit__`` until every rank has joined (each of its waits bounded by the group's
    timeout through the collectives).
    """

    def __init__(self, ddp: "DistributedDataParallel", enable: bool, throw_on_early_termination: bool,
                 divide_by_initial_world_size: bool) -> None:
        self._ddp = ddp
        self._config = JoinConfig(enable, throw_on_early_termination, divide_by_initial_world_size)

    def __enter__(self) -> "Join":
        self._ddp.join_config = self._config
        # Dividing by the ranks still training is not the all-reduce's AVG: scale, then sum.
        self._ddp.reducer.prescale = self._config.enable and not self._config.divide_by_initial_world_size
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        ddp = self._ddp
        try:
            if not self._config.enable or exc_type is not None:
                return  # an exception inside the block propagates; no shadowing
            last_joiner = True
            while _all_reduce_scalar(ddp, 0.0) > 0:  # ranks still training
                if self._config.throw_on_early_termination:
                    _all_reduce_scalar(ddp, 1.0)  # tells them, in their notify_join_context
                    raise ZgradError(f"Rank {ddp.process_group.rank()} exhausted all inputs.")
                self._shadow_iteration()
                last_joiner = False
            self._sync_final_model(last_joiner)
        finally:
            ddp.join_config = None
            ddp.reducer.before_first_hook = None
            ddp.reducer.prescale = False

    def _shadow_iteration(self) -> None:
        ddp = self._ddp
        reducer = ddp.reducer
        reducer.rebuild_buckets()
        ddp.sync_buffers()
        should_sync = check_global_requires_backward_grad_sync(ddp, joined=True)
        ddp.require_forward_param_sync = should_sync
        if should_sync:
            reducer.shadow_backward()
        reducer.push_all_rebuilt_params()

    def _sync_final_model(self, last_joiner: bool) -> None:
        """Every rank takes the model of the (highest-ranked) last rank to join."""
        ddp = self._ddp
        rank = ddp.process_group.rank()
        authoritative = int(_all_reduce_scalar(ddp, float(rank if last_joiner else -1), ReduceOp.MAX))
        ddp.authoritative_rank = authoritative
        ddp.sync_module_states(authoritative)
