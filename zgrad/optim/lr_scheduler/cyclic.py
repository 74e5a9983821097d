"""Cyclical schedules that also cycle the momentum: ``CyclicLR`` (triangular, triangular2,
exp_range or a custom scale) and ``OneCycleLR`` (warm-up to max_lr, then anneal far below), with
PyTorch 2.13's arithmetic. The momentum cycles through the groups' ``momentum`` (SGD) or the first
of their ``betas`` (Adam), opposite to the rate."""

from __future__ import annotations

import math
import types
from functools import partial
from typing import Any, Callable

from zgrad.optim.lr_scheduler.base import LRScheduler, check_optimizer, format_param

__all__ = ["CyclicLR", "OneCycleLR"]


def _uses_beta1(optimizer: Any) -> bool:
    """Whether the optimizer's momentum is ``betas[0]`` (else ``momentum``).

    Raises:
        ValueError: it has neither (PyTorch's message).
    """
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
    return "betas" in optimizer.defaults


def _set_momentum(group: dict[str, Any], momentum: float, use_beta1: bool) -> None:
    if use_beta1:
        group["betas"] = (momentum, *group["betas"][1:])
    else:
        group["momentum"] = momentum


class CyclicLR(LRScheduler):
    """The rate cycles between ``base_lr`` and ``max_lr`` (up over ``step_size_up`` steps, down
    over ``step_size_down``), the amplitude scaled per cycle or per iteration by ``mode`` or
    ``scale_fn``; with ``cycle_momentum`` the momentum cycles between ``max_momentum`` and
    ``base_momentum`` the other way. Step it after every batch.

    Raises:
        TypeError: ``optimizer`` is not an Optimizer.
        ValueError: an unknown ``mode`` without ``scale_fn``; ``cycle_momentum`` with an optimizer
            that has no momentum; a per-group list of the wrong length.
    """

    def __init__(self, optimizer: Any, base_lr: float | list[float], max_lr: float | list[float],
                 step_size_up: int = 2000, step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable[[float], float] | None = None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum: float = 0.8, max_momentum: float = 0.9,
                 last_epoch: int = -1) -> None:
        check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = format_param("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups, strict=True):
                group["lr"] = lr
        self.max_lrs = format_param("max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _uses_beta1(optimizer)
            self.base_momentums = format_param("base_momentum", optimizer, base_momentum)
            self.max_momentums = format_param("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for high, low, group in zip(self.max_momentums, self.base_momentums, optimizer.param_groups,
                                            strict=True):
                    _set_momentum(group, high, self.use_beta1)
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref = self._triangular_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = self._triangular2_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self._scale_fn_ref = partial(self._exp_range_scale_fn, self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x: float) -> float:
        """The amplitude's scale at cycle (or iteration) ``x``: ``scale_fn`` if given, else the mode's."""
        return self._scale_fn_custom(x) if self._scale_fn_custom is not None else self._scale_fn_ref(x)

    @staticmethod
    def _triangular_scale_fn(x: float) -> float:
        return 1.0

    @staticmethod
    def _triangular2_scale_fn(x: float) -> float:
        return 1 / (2.0 ** (x - 1))

    @staticmethod
    def _exp_range_scale_fn(gamma: float, x: float) -> float:
        return gamma ** x

    def get_lr(self) -> list[float]:
        """The rates at ``last_epoch``; sets the groups' momentum too when it cycles."""
        self._warn_if_called_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        scale_factor = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base_lr + (max_lr - base_lr) * scale_factor * scale
               for base_lr, max_lr in zip(self.base_lrs, self.max_lrs, strict=True)]
        if self.cycle_momentum:
            for group, low, high in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums,
                                        strict=True):
                _set_momentum(group, high - (high - low) * scale_factor * scale, self.use_beta1)
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """The attributes but the optimizer and the mode's scale function (rebuilt on load); a
        custom ``scale_fn`` that is an object keeps its attributes, a function nothing."""
        state = super().state_dict()
        state.pop("_scale_fn_ref", None)
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None if fn is None or isinstance(fn, types.FunctionType) else fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved_fn = state_dict["_scale_fn_custom"]
        custom = self._scale_fn_custom
        super().load_state_dict({key: value for key, value in state_dict.items() if key != "_scale_fn_custom"})
        if saved_fn is not None:
            custom.__dict__.update(saved_fn)
        self._init_scale_fn()


class OneCycleLR(LRScheduler):
    """The 1cycle policy: the rate rises from max_lr / div_factor to ``max_lr`` over ``pct_start``
    of ``total_steps`` (or ``epochs * steps_per_epoch``), then anneals (cosine or linear) to
    initial_lr / final_div_factor; ``three_phase`` comes back to the initial rate before the final
    descent. The momentum moves the other way. Step it after every batch, ``total_steps`` times.

    Raises:
        TypeError: ``optimizer`` is not an Optimizer.
        ValueError: PyTorch's errors for the step counts, ``pct_start``, ``anneal_strategy``, a
            momentum-less optimizer with ``cycle_momentum``; ``step`` past ``total_steps``.
    """

    def __init__(self, optimizer: Any, max_lr: float | list[float], total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True, base_momentum: float | list[float] = 0.85,
                 max_momentum: float | list[float] = 0.95, div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1) -> None:
        check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        self._schedule_phases = self._phases(pct_start, three_phase)
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        max_lrs = format_param("max_lr", self.optimizer, max_lr)
        if last_epoch == -1:
            for group, top in zip(self.optimizer.param_groups, max_lrs):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _uses_beta1(optimizer)
            max_momentums = format_param("max_momentum", optimizer, max_momentum)
            base_momentums = format_param("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for high, low, group in zip(max_momentums, base_momentums, optimizer.param_groups, strict=True):
                    _set_momentum(group, high, self.use_beta1)
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        super().__init__(optimizer, last_epoch)

    def _phases(self, pct_start: float, three_phase: bool) -> list[dict[str, Any]]:
        """Each phase's last step and the group keys its rate and momentum go from and to."""
        def phase(end_step: float, lrs: tuple[str, str], momentums: tuple[str, str]) -> dict[str, Any]:
            return {"end_step": end_step, "start_lr": lrs[0], "end_lr": lrs[1], "start_momentum": momentums[0],
                    "end_momentum": momentums[1]}

        warm_up = phase(float(pct_start * self.total_steps) - 1, ("initial_lr", "max_lr"),
                        ("max_momentum", "base_momentum"))
        if three_phase:
            return [warm_up,
                    phase(float(2 * pct_start * self.total_steps) - 2, ("max_lr", "initial_lr"),
                          ("base_momentum", "max_momentum")),
                    phase(self.total_steps - 1, ("initial_lr", "min_lr"), ("max_momentum", "max_momentum"))]
        return [warm_up, phase(self.total_steps - 1, ("max_lr", "min_lr"), ("base_momentum", "max_momentum"))]

    def _anneal_func(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        """The rates at ``last_epoch``; sets the groups' momentum too when it cycles.

        Raises:
            ValueError: stepped past ``total_steps`` (PyTorch's message).
        """
        self._warn_if_called_outside_step()
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step - start_step) / (end_step - start_step)
                    lrs.append(self._anneal_func(group[phase["start_lr"]], group[phase["end_lr"]], pct))
                    if self.cycle_momentum:
                        momentum = self._anneal_func(group[phase["start_momentum"]], group[phase["end_momentum"]], pct)
                        _set_momentum(group, momentum, self.use_beta1)
                    break
                start_step = phase["end_step"]
        return lrs
