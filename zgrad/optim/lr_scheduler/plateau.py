"""``ReduceLROnPlateau``: lower the rate when a metric stops improving, as PyTorch 2.13's."""

from __future__ import annotations

import math
import warnings
from typing import Any, SupportsFloat

from zgrad.optim.lr_scheduler.base import EPOCH_DEPRECATION_WARNING, LRScheduler, check_optimizer, group_values

__all__ = ["ReduceLROnPlateau"]


class ReduceLROnPlateau(LRScheduler):
    """Multiply every group's rate by ``factor`` (not below its ``min_lr``) once the metric given to
    :meth:`step` has not improved for more than ``patience`` steps, then wait ``cooldown`` steps.

    An improvement beats the best value so far by ``threshold``: relatively (``threshold_mode``
    "rel": below best * (1 - threshold) in "min" mode, above best * (1 + threshold) in "max"), or
    absolutely ("abs"). A change of the rate smaller than ``eps`` is not made.

    Raises:
        ValueError: ``factor`` >= 1, an unknown ``mode`` or ``threshold_mode``, a ``min_lr`` list of
            the wrong length.
        TypeError: ``optimizer`` is not an Optimizer.
    """

    def __init__(self, optimizer: Any, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr: list[float] | float = 0, eps: float = 1e-8) -> None:
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        check_optimizer(optimizer)
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = group_values(self.optimizer, "lr")
        self._init_is_better(mode=mode, threshold=threshold, threshold_mode=threshold_mode)
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics: SupportsFloat, epoch: int | None = None) -> None:  # type: ignore[override]
        """Record ``metrics`` (the validation loss, say) and reduce the rates if it has plateaued.

        Warns: ``epoch`` given (deprecated, PyTorch's warning).
        """
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = group_values(self.optimizer, "lr")

    def _reduce_lr(self) -> None:
        if len(self.optimizer.param_groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(self.optimizer.param_groups)}) differs from "
                    f"when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), usually due to a new param group "
                    "being added to the optimizer. Please modify the `min_lrs` field to match the length of the "
                    "`optimizer` param groups.")
            self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)
        for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, min_lr)
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in ("min", "max"):
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
        self._init_is_better(mode=self.mode, threshold=self.threshold, threshold_mode=self.threshold_mode)
