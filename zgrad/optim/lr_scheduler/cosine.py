"""Cosine schedules: ``CosineAnnealingLR`` (one half-period down, then back up) and
``CosineAnnealingWarmRestarts`` (SGDR: down over T_i epochs, restart, T_i grown by T_mult), with
PyTorch 2.13's arithmetic."""

from __future__ import annotations

import math
from typing import Any

from zgrad.optim.lr_scheduler.base import LRScheduler, TemporaryFlag, group_values

__all__ = ["CosineAnnealingLR", "CosineAnnealingWarmRestarts"]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, computed as
    PyTorch's recursive (chainable) form on each step and in closed form for ``step(epoch)``."""

    def __init__(self, optimizer: Any, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:  # noqa: N803
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        groups = self.optimizer.param_groups
        if self._is_initial:
            return group_values(self.optimizer, "lr")
        if self._step_count == 1 and self.last_epoch > 0:  # resumed at last_epoch: start from the closed form
            return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                    for base_lr in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:  # at the bottom: the step that turns up
            return [group["lr"] + (base_lr - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, groups, strict=True)]
        return [(1 + math.cos(math.pi * self.last_epoch / self.T_max))
                / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max)) * (group["lr"] - self.eta_min)
                + self.eta_min for group in groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2, T_cur counting the
    epochs since the last restart; restarts every T_i epochs, T_i = T_0 * T_mult ** restarts.
    ``step(epoch)`` accepts fractional epochs (steps within an epoch), as PyTorch's.

    Raises:
        ValueError: T_0 not a positive int, T_mult not an int >= 1, eta_min not a number;
            ``step`` with a negative epoch.
    """

    def __init__(self, optimizer: Any, T_0: int, T_mult: int = 1, eta_min: float = 0.0,  # noqa: N803
                 last_epoch: int = -1) -> None:
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base_lr in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or go to ``epoch`` (which may be fractional: ``epoch + i / iters``)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    restarts = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** restarts - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** restarts
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        with TemporaryFlag(self, "_get_lr_called_within_step"):
            for group, lr in zip(self.optimizer.param_groups, self.get_lr(), strict=True):
                group["lr"] = lr
        self._last_lr = group_values(self.optimizer, "lr")
