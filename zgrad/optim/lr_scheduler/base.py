"""The learning-rate scheduler base, with PyTorch 2.13's semantics (``torch.optim.lr_scheduler``).

A scheduler sets ``group["lr"]`` of every parameter group of its optimizer on each ``step()``.
Construction records ``initial_lr`` in each group (``base_lrs``) and takes the first step
(``last_epoch`` becomes 0). ``get_lr()`` is the *chainable* form: the next rates computed from the
groups' current ones, so several schedulers may act on one optimizer; ``step(epoch)`` (deprecated,
with PyTorch's warning) uses the *closed form* ``_get_closed_form_lr()`` where a scheduler has one.
The wrapped ``optimizer.step`` records that it ran, for PyTorch's warning about calling
``scheduler.step()`` first. ``state_dict()`` is every attribute but the optimizer: plain data, so
``zgrad.save`` stores it.

Learning rates are Python floats (PyTorch also accepts tensors; zgrad's optimizers read floats).
"""

from __future__ import annotations

import functools
import warnings
import weakref
from typing import Any

from zgrad.optim.optimizer import Optimizer

__all__ = ["EPOCH_DEPRECATION_WARNING", "LRScheduler", "TemporaryFlag", "check_optimizer", "format_param", "group_values",
           "_LRScheduler"]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where possible. Please use "
    "`scheduler.step()` to step the scheduler. During the deprecation, if epoch is different from None, the closed "
    "form is used instead of the new chainable form, where available. Please open an issue if you are unable to "
    "replicate your use case: https://github.com/pytorch/pytorch/issues/new/choose."
)
_SCHEDULE_DOCS = "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate"


def format_param(name: str, optimizer: Any, value: Any) -> list[Any]:
    """``value`` per parameter group: a list or tuple of one per group, or one value for all.

    Raises:
        ValueError: a list whose length is not the number of groups.
    """
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. {name} has {len(value)} "
                             f"values, param_groups has {len(optimizer.param_groups)}.")
        return list(value)
    return [value] * len(optimizer.param_groups)


def group_values(optimizer: Any, key: str) -> list[Any]:
    """``group[key]`` of every parameter group of ``optimizer``."""
    return [group[key] for group in optimizer.param_groups]


def check_optimizer(optimizer: Any) -> None:
    """Raises TypeError unless ``optimizer`` is a :class:`zgrad.optim.Optimizer` (PyTorch's message)."""
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _track_optimizer_steps(optimizer: Any) -> None:
    """Wrap ``optimizer.step`` (once) so that each call sets ``optimizer._opt_called``."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    step = optimizer.step.__func__
    owner = weakref.ref(optimizer)  # the wrapper lives on the optimizer: no cycle through it

    @functools.wraps(step)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        opt = owner()
        opt._opt_called = True
        return step(opt, *args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    optimizer.step = wrapper


class TemporaryFlag:
    """Set a boolean attribute of a scheduler for the duration of a ``with`` block."""

    def __init__(self, scheduler: "LRScheduler", attribute: str) -> None:
        self.scheduler, self.attribute = scheduler, attribute

    def __enter__(self) -> None:
        setattr(self.scheduler, self.attribute, True)

    def __exit__(self, *exc: Any) -> None:
        setattr(self.scheduler, self.attribute, False)


class LRScheduler:
    """Adjusts the learning rate of each parameter group of ``optimizer`` at every :meth:`step`.

    Args:
        optimizer: a :class:`zgrad.optim.Optimizer`.
        last_epoch: the index of the last epoch; -1 (the default) starts a schedule, a value
            >= 0 resumes one (the groups must hold ``initial_lr`` then, as a loaded optimizer's do).

    Raises:
        TypeError: ``optimizer`` is not an Optimizer.
        KeyError: resuming (``last_epoch >= 0``) with a group that has no ``initial_lr``.
    """

    _get_lr_called_within_step = False
    _is_initial = False

    def __init__(self, optimizer: Any, last_epoch: int = -1) -> None:
        check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming scheduler with "
                        "last_epoch >= 0.\nThis typically happens when:\n1. You're trying to resume training from a "
                        "checkpoint but haven't properly loaded the optimizer state\n2. You're using last_epoch >= 0 "
                        "for a fresh training run (not recommended)")
        self.base_lrs: list[float] = group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _track_optimizer_steps(optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        """The step taken at construction (and by SequentialLR when a scheduler's turn comes)."""
        self._step_count = 0
        with TemporaryFlag(self, "_is_initial"):
            self.step()

    def state_dict(self) -> dict[str, Any]:
        """Every attribute of the scheduler except its optimizer."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take the attributes of ``state_dict`` (from :meth:`state_dict`)."""
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list[float]:
        """The learning rates the last :meth:`step` set, one per parameter group."""
        return self._last_lr

    def get_lr(self) -> list[float]:
        """The next learning rates (the chainable form); subclasses implement it."""
        raise NotImplementedError

    def step(self, epoch: int | None = None) -> None:
        """Advance the schedule by one epoch (or, deprecated, to ``epoch``) and set the groups' rates.

        Warns (``UserWarning``, as PyTorch): the first call comes before any ``optimizer.step()``,
        or ``optimizer.step`` was replaced after the scheduler wrapped it; ``epoch`` is given.
        """
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn("Seems like `optimizer.step()` has been overridden after learning rate scheduler "
                              "initialization. Please, make sure to call `optimizer.step()` before "
                              f"`lr_scheduler.step()`. See more details at {_SCHEDULE_DOCS}", UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
                              "later, you should call them in the opposite order: `optimizer.step()` before "
                              "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first "
                              f"value of the learning rate schedule. See more details at {_SCHEDULE_DOCS}",
                              UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        with TemporaryFlag(self, "_get_lr_called_within_step"):
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed_form = getattr(self, "_get_closed_form_lr", None)
                values = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = group_values(self.optimizer, "lr")

    def _warn_if_called_outside_step(self) -> None:
        """PyTorch's warning for ``get_lr()`` called by the user rather than by :meth:`step`."""
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=3)


class _LRScheduler(LRScheduler):
    """The old name of :class:`LRScheduler`, kept as PyTorch keeps it."""
