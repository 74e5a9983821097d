"""Schedulers that scale the rate by factors: ``LambdaLR``, ``MultiplicativeLR``, ``StepLR``,
``MultiStepLR``, ``ConstantLR``, ``LinearLR``, ``ExponentialLR`` and ``PolynomialLR``, each with
PyTorch 2.13's chainable form (``get_lr``) and, where PyTorch has one, its closed form."""

from __future__ import annotations

import types
from bisect import bisect_right
from collections import Counter
from typing import Any, Callable, Iterable

from zgrad.optim.lr_scheduler.base import LRScheduler, group_values

__all__ = ["ConstantLR", "ExponentialLR", "LambdaLR", "LinearLR", "MultiStepLR", "MultiplicativeLR", "PolynomialLR",
           "StepLR"]


class _LambdaScheduler(LRScheduler):
    """What LambdaLR and MultiplicativeLR share: one function of the epoch per group; the state
    dict keeps the attributes of callable objects (plain functions and lambdas are not data)."""

    def __init__(self, optimizer: Any, lr_lambda: Callable[[int], float] | list, last_epoch: int,
                 require_callable: bool = False) -> None:
        self.optimizer = optimizer
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        for fn in self.lr_lambdas if require_callable else ():
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict[str, Any]:
        state = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        lambdas = state_dict["lr_lambdas"]
        self.__dict__.update({key: value for key, value in state_dict.items() if key != "lr_lambdas"})
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


class LambdaLR(_LambdaScheduler):
    """lr = initial_lr * lr_lambda(epoch), per group (``lr_lambda`` one function or one per group)."""

    def __init__(self, optimizer: Any, lr_lambda: Callable[[int], float] | list, last_epoch: int = -1) -> None:
        super().__init__(optimizer, lr_lambda, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        return [base_lr * fn(self.last_epoch) for fn, base_lr in zip(self.lr_lambdas, self.base_lrs, strict=True)]


class MultiplicativeLR(_LambdaScheduler):
    """lr = lr * lr_lambda(epoch) at each step after the first.

    Raises:
        TypeError: a ``lr_lambda`` that is not callable.
    """

    def __init__(self, optimizer: Any, lr_lambda: Callable[[int], float] | list, last_epoch: int = -1) -> None:
        super().__init__(optimizer, lr_lambda, last_epoch, require_callable=True)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        if self._is_initial:
            return group_values(self.optimizer, "lr")
        return [group["lr"] * fn(self.last_epoch)
                for fn, group in zip(self.lr_lambdas, self.optimizer.param_groups, strict=True)]


class StepLR(LRScheduler):
    """lr = initial_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer: Any, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return group_values(self.optimizer, "lr")
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = initial_lr * gamma ** (the number of milestones reached); a milestone listed twice
    counts twice."""

    def __init__(self, optimizer: Any, milestones: Iterable[int], gamma: float = 0.1, last_epoch: int = -1) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self.milestones = Counter(self.milestones)  # a checkpoint gives the Counter back as a dict

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        if self.last_epoch not in self.milestones:
            return group_values(self.optimizer, "lr")
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch] for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch) for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = initial_lr * factor for the first ``total_iters`` epochs, then initial_lr.

    Raises:
        ValueError: ``factor`` outside [0, 1].
    """

    def __init__(self, optimizer: Any, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1) -> None:
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return group_values(self.optimizer, "lr")
        return [group["lr"] * (1.0 / self.factor) for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """lr goes linearly from initial_lr * start_factor to initial_lr * end_factor over
    ``total_iters`` epochs (a warm-up when start_factor < end_factor).

    Raises:
        ValueError: start_factor outside (0, 1] or end_factor outside [0, 1].
    """

    def __init__(self, optimizer: Any, start_factor: float = 1.0 / 3, end_factor: float = 1.0, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return group_values(self.optimizer, "lr")
        span = self.end_factor - self.start_factor
        return [group["lr"] * (1.0 + span / (self.total_iters * self.start_factor + (self.last_epoch - 1) * span))
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor)
                           * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = initial_lr * gamma ** epoch."""

    def __init__(self, optimizer: Any, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        if self._is_initial:
            return group_values(self.optimizer, "lr")
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = initial_lr * (1 - min(epoch, total_iters) / total_iters) ** power."""

    def __init__(self, optimizer: Any, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        if self._is_initial or self.last_epoch > self.total_iters:
            return group_values(self.optimizer, "lr")
        decay = ((1.0 - self.last_epoch / self.total_iters) / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [group["lr"] * decay for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
                for base_lr in self.base_lrs]
