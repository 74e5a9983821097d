"""``SWALR``: anneal each group's rate to a fixed ``swa_lr`` for stochastic weight averaging, with
PyTorch 2.13's arithmetic (``torch.optim.swa_utils.SWALR``; exported by :mod:`zgrad.optim.swa_utils`)."""

from __future__ import annotations

import math
from typing import Any, Callable, Literal

from zgrad.optim.lr_scheduler.base import LRScheduler, format_param

__all__ = ["SWALR"]

_ANNEAL_STRATEGIES = ("cos", "linear")


def _linear_anneal(t: float) -> float:
    return t


def _cosine_anneal(t: float) -> float:
    return (1 - math.cos(math.pi * t)) / 2


class SWALR(LRScheduler):
    """Anneal the rate of each parameter group from its current value to ``swa_lr`` over
    ``anneal_epochs`` steps, then hold it there (as ``torch.optim.swa_utils.SWALR``).

    Each step interpolates ``lr = swa_lr * alpha + lr0 * (1 - alpha)`` with ``alpha =
    anneal(min(1, step / anneal_epochs))``, ``lr0`` being the rate the previous step's ``alpha``
    started from (recovered from the group's current rate, so other schedulers may act between steps).
    The group's target is stored as ``group["swa_lr"]``.

    Args:
        optimizer: a :class:`zgrad.optim.Optimizer`.
        swa_lr: the final rate: one for all groups, or a list or tuple of one per group.
        anneal_epochs: steps of annealing (0: jump to ``swa_lr`` at the first step).
        anneal_strategy: ``"cos"`` (cosine) or ``"linear"``.
        last_epoch: the index of the last epoch (-1 starts a schedule).

    Raises:
        ValueError: ``swa_lr`` a list whose length is not the number of groups; ``anneal_strategy``
            not ``"cos"`` or ``"linear"``; ``anneal_epochs`` not an int >= 0.
        TypeError: ``optimizer`` is not an Optimizer.
    """

    def __init__(self, optimizer: Any, swa_lr: float | list[float], anneal_epochs: int = 10,
                 anneal_strategy: Literal["cos", "linear"] = "cos", last_epoch: int = -1) -> None:
        for value, group in zip(format_param("swa_lr", optimizer, swa_lr), optimizer.param_groups, strict=True):
            group["swa_lr"] = value
        if anneal_strategy not in _ANNEAL_STRATEGIES:
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _set_anneal_func(self, anneal_strategy: str) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func: Callable[[float], float] = _cosine_anneal if anneal_strategy == "cos" else _linear_anneal

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        """The rate ``lr0`` that interpolation weight ``alpha`` took to ``lr``."""
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _anneal_fraction(self, step: int) -> float:
        return self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))

    def get_lr(self) -> list[float]:
        """The next rates, one per group (warns, as PyTorch, when called outside :meth:`step`)."""
        self._warn_if_called_outside_step()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self._anneal_fraction(step - 1)
        alpha = self._anneal_fraction(step)
        groups = self.optimizer.param_groups
        start_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha) for group in groups]
        return [group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(groups, start_lrs, strict=True)]

    def state_dict(self) -> dict[str, Any]:
        """Every attribute except the optimizer and the anneal function (rebuilt on load)."""
        return {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take the attributes of ``state_dict`` (from :meth:`state_dict`) and rebuild the anneal function."""
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
