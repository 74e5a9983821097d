"""Schedulers made of schedulers: ``SequentialLR`` (one after the other, switching at milestones)
and ``ChainedScheduler`` (all of them at every step, their factors multiplying), as PyTorch 2.13's."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Sequence

from zgrad.optim.lr_scheduler.base import LRScheduler, group_values
from zgrad.optim.lr_scheduler.plateau import ReduceLROnPlateau

__all__ = ["ChainedScheduler", "SequentialLR"]


class _Composite(LRScheduler):
    """What both share: the checks on the schedulers, and a state dict holding theirs."""

    def _check(self, optimizer: Any, schedulers: Sequence[LRScheduler], what: str) -> None:
        name = type(self).__name__
        if len(schedulers) < 1:
            raise ValueError(f"{name} expects at least one scheduler{what}, but got no scheduler.")
        for i, scheduler in enumerate(schedulers):
            if not hasattr(scheduler, "optimizer"):
                raise TypeError(f"{name} at index {i} should have `optimizer` as its attribute.")
            if isinstance(scheduler, ReduceLROnPlateau):
                raise ValueError(f"{name} does not support `ReduceLROnPlateau` scheduler as it requires additional "
                                 "kwargs to be specified when calling `step`, but got one at index "
                                 f"{i} in the given schedulers sequence.")
            if optimizer != scheduler.optimizer:
                raise ValueError(f"{name} expects all schedulers to belong to the same optimizer, but got scheduler "
                                 f"{type(scheduler).__name__} at index {i} has {scheduler.optimizer}, which is "
                                 f"different from {type(optimizer).__name__}.")

    def state_dict(self) -> dict[str, Any]:
        """The attributes but the optimizer, with each scheduler's state dict under ``_schedulers``."""
        state = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [scheduler.state_dict() for scheduler in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update({key: value for key, value in state_dict.items() if key != "_schedulers"})
        for scheduler, saved in zip(self._schedulers, state_dict["_schedulers"]):
            scheduler.load_state_dict(saved)


class SequentialLR(_Composite):
    """Runs ``schedulers[0]`` until ``milestones[0]``, then ``schedulers[1]`` (started afresh at
    epoch 0), and so on: a warm-up followed by a decay.

    Raises:
        ValueError: no scheduler, a ReduceLROnPlateau, schedulers of another optimizer, or not one
            milestone fewer than schedulers (PyTorch's messages).
        TypeError: an element without an ``optimizer``.
    """

    def __init__(self, optimizer: Any, schedulers: list[LRScheduler], milestones: list[int],
                 last_epoch: int = -1) -> None:
        self._check(optimizer, schedulers, "")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got number of schedulers {len(schedulers)} and the "
                             f"number of milestones to be equal to {len(milestones)}")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:  # undo the first step each scheduler took when it was made
            group["lr"] = group["initial_lr"]
        self.recursive_undo()
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def recursive_undo(self, sched: Any = None) -> None:
        """Step back the ``last_epoch`` of every scheduler inside, nested composites included."""
        scheduler = self if sched is None else sched
        if hasattr(scheduler, "_schedulers"):
            for inner in scheduler._schedulers:
                self.recursive_undo(inner)
        elif hasattr(scheduler, "last_epoch"):
            scheduler.last_epoch -= 1

    def step(self) -> None:  # type: ignore[override]
        """Step the scheduler whose turn it is (restarting it at epoch 0 on its milestone)."""
        self.last_epoch += 1
        index = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Composite):
    """Steps every scheduler of ``schedulers`` at each :meth:`step`, in order.

    Raises:
        ValueError: no scheduler, a ReduceLROnPlateau, or schedulers of different optimizers.
        TypeError: an element without an ``optimizer``.
    """

    def __init__(self, schedulers: Sequence[LRScheduler], optimizer: Any = None) -> None:
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler to be chained, but got no "
                             "scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        self._check(optimizer, schedulers, " to be chained")
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = group_values(self._schedulers[-1].optimizer, "lr")

    def step(self) -> None:  # type: ignore[override]
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = group_values(self._schedulers[-1].optimizer, "lr")
