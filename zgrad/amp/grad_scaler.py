"""``zgrad.amp.GradScaler``: dynamic loss scaling, PyTorch's algorithm.

Per optimizer, an iteration moves READY -> UNSCALED (``unscale_``, explicit or inside ``step``)
-> STEPPED (``step``); ``update`` returns every optimizer to READY. ``unscale_`` divides the
gradients by the scale and records, per device type, whether one held an inf or NaN (one fused
pass over each gradient); ``step`` skips ``optimizer.step()`` when any did; ``update`` multiplies
the scale by ``backoff_factor`` after a skipped step, and by ``growth_factor`` after
``growth_interval`` steps in a row without one. The scale is a float32 number, as PyTorch's
scale tensor, and the arithmetic on it is PyTorch's (float64, rounded to float32).

Under a default process group (DDP) the inf flags are all-reduced (MAX) in ``unscale_``, so every
rank skips the same steps and keeps the same scale even when only one rank's gradients overflowed.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from enum import Enum
from typing import Any, Iterable

import numpy as np

from zgrad.engine.grad_mode import no_grad
from zgrad.kernels import dispatch
from zgrad.tensor import Tensor

__all__ = ["GradScaler", "OptState"]

_FLOAT32 = np.dtype(np.float32)
_FLAG = np.dtype(np.int32)  # the inf flags: int32, so no float kernel variant computes in another float type


class OptState(Enum):
    """Where an optimizer is in the current iteration."""

    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_optimizer_state() -> dict[str, Any]:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _float32(value: float) -> float:
    with np.errstate(over="ignore"):  # a scale grown past float32's range is inf, and is not taken
        return float(np.float32(value))


class GradScaler:
    """Scales the loss so float16 gradients do not underflow, and steps only on finite gradients.

    Example::

        scaler = zgrad.amp.GradScaler("cpu")
        for x, target in data:
            optimizer.zero_grad()
            with zgrad.autocast("cpu", dtype=zgrad.float16):
                loss = loss_fn(model(x), target)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)           # optional: to clip or inspect the true gradients
            zgrad.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)               # skipped if a gradient is inf or NaN
            scaler.update()

    Not thread-safe: one scaler serves one training loop.

    Args:
        device: "cuda" or "cpu", the device type of the scale (a "cuda" scaler without CUDA
            disables itself with a warning, as PyTorch's).
        init_scale: the first scale.
        growth_factor: what the scale is multiplied by after ``growth_interval`` good steps (> 1).
        backoff_factor: what the scale is multiplied by after a step with an inf or NaN (< 1).
        growth_interval: how many consecutive steps without inf or NaN make the scale grow.
        enabled: False makes ``step`` a plain ``optimizer.step()`` and the other methods no-ops.

    Raises:
        AssertionError: ``growth_factor`` <= 1 or ``backoff_factor`` >= 1 (PyTorch's type and
            messages).
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled and not dispatch.backend_available("cuda"):
            warnings.warn("zgrad.amp.GradScaler is enabled, but CUDA is not available.  Disabling.", stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale: float | None = None  # set by the first scale()
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker: int | None = None
            self._per_optimizer_states: defaultdict[int, dict[str, Any]] = defaultdict(_fresh_optimizer_state)

    def _check_scale_growth_tracker(self, funcname: str) -> None:
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)

    def _scale_on(self, like: Tensor) -> Tensor:
        if self._scale is None:
            self._scale = _float32(self._init_scale)
            self._growth_tracker = self._init_growth_tracker
        device_type = dispatch.device_type_of(like._data)
        return Tensor(dispatch.full((), self._scale, _FLOAT32, device_type))

    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or a list, tuple or iterable of them, nested) times the scale;
        ``outputs`` itself when disabled.

        Raises:
            ValueError: an output is neither a tensor nor an iterable of them.
        """
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale_on(outputs)
        if isinstance(outputs, Iterable):
            scaled = map(self.scale, outputs)
            return type(outputs)(scaled) if isinstance(outputs, (list, tuple)) else scaled
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _unscale_grads_(self, optimizer: Any, inv_scale: float, allow_fp16: bool) -> dict[str, Tensor]:
        """Unscale every gradient of ``optimizer`` in place; per device type, a 1-element int32
        tensor that is 1 if a gradient there held an inf or NaN."""
        found_inf_per_device: dict[str, Any] = {}
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if param.grad is None:
                        continue
                    grad = param.grad._data
                    if not allow_fp16 and grad.dtype == np.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    device_type = dispatch.device_type_of(grad)
                    found_inf = found_inf_per_device.get(device_type)
                    if found_inf is None:
                        found_inf = found_inf_per_device[device_type] = dispatch.full((1,), 0, _FLAG, device_type)
                    dispatch.backend_of(grad).non_finite_check_and_unscale(grad, found_inf, inv_scale)
        return {device_type: Tensor(found) for device_type, found in found_inf_per_device.items()}

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place, and record whether one held an
        inf or NaN. Optional: ``step`` does it when it was not called; call it before changing or
        reading the gradients (``clip_grad_norm_``). Under a default process group it blocks
        until every rank has unscaled (the inf flags are all-reduced).

        Raises:
            RuntimeError: called twice for ``optimizer`` since the last ``update()``, or after
                ``step()``.
            ValueError: a gradient is float16.
            AssertionError: ``scale()`` was never called.
        """
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = _float32(1.0 / self._scale)
        found = self._unscale_grads_(optimizer, inv_scale, allow_fp16=False)
        optimizer_state["found_inf_per_device"] = _agree_across_ranks(found)
        optimizer_state["stage"] = OptState.UNSCALED

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``unscale_(optimizer)`` unless done, then ``optimizer.step(*args, **kwargs)`` unless a
        gradient held an inf or NaN.

        Returns:
            What ``optimizer.step`` returned, or None when the step was skipped.

        Raises:
            RuntimeError: a ``closure`` keyword (not supported, as in PyTorch), or ``step()`` called
                twice since the last ``update()``.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if optimizer_state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if not optimizer_state["found_inf_per_device"]:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        result = None
        if not sum(found.item() for found in optimizer_state["found_inf_per_device"].values()):
            result = optimizer.step(*args, **kwargs)
        optimizer_state["stage"] = OptState.STEPPED
        return result

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Back the scale off if any optimizer's step was skipped this iteration, else grow it
        after ``growth_interval`` good steps in a row; or set it to ``new_scale``. Call it once
        per iteration, after every ``step``.

        Raises:
            AssertionError: ``new_scale`` is a tensor that is not one element on the scaler's
                device type without grad (PyTorch's message), or no step recorded an inf check.
        """
        if not self._enabled:
            return
        self._check_scale_growth_tracker("update")
        if new_scale is not None:
            self._scale = _float32(_checked_new_scale(new_scale, self._device))
        else:
            found_infs = [found.item() for state in self._per_optimizer_states.values()
                          for found in state["found_inf_per_device"].values()]
            if not found_infs:
                raise AssertionError("No inf checks were recorded prior to update.")
            self._scale, self._growth_tracker = _updated_scale(
                self._scale, self._growth_tracker, sum(found_infs) > 0, self._growth_factor, self._backoff_factor,
                self._growth_interval)
        self._per_optimizer_states = defaultdict(_fresh_optimizer_state)

    def get_scale(self) -> float:
        """The current scale (the initial one before the first ``scale()``); 1.0 when disabled."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker

    def is_enabled(self) -> bool:
        """Whether this scaler scales (False when built disabled, or for "cuda" without CUDA)."""
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval`` and
        ``_growth_tracker`` (PyTorch's keys); empty when disabled. Take it after ``update()``."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take the state :meth:`state_dict` returned (a no-op when disabled).

        Raises:
            RuntimeError: ``state_dict`` is empty (saved from a disabled scaler).
        """
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale = _float32(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker = int(state_dict["_growth_tracker"])


def _checked_new_scale(new_scale: float | Tensor, device_type: str) -> float:
    if isinstance(new_scale, float):
        return new_scale
    reason = ("new_scale should be a float or a 1-element zgrad.cuda.FloatTensor or "
              "zgrad.FloatTensor with requires_grad=False.")
    if (not isinstance(new_scale, Tensor) or new_scale.device.type != device_type or new_scale.numel() != 1
            or new_scale.requires_grad):
        raise AssertionError(reason)
    return float(new_scale.item())


def _updated_scale(scale: float, growth_tracker: int, found_inf: bool, growth_factor: float, backoff_factor: float,
                   growth_interval: int) -> tuple[float, int]:
    """PyTorch's ``_amp_update_scale_``: (the next scale, the next count of good steps)."""
    if found_inf:
        return _float32(scale * backoff_factor), 0
    successful = growth_tracker + 1
    if successful != growth_interval:
        return scale, successful
    grown = _float32(scale * growth_factor)
    return (grown if np.isfinite(grown) else scale), 0


def _agree_across_ranks(found_inf_per_device: dict[str, Tensor]) -> dict[str, Tensor]:
    """Under a default process group, every device's flag becomes the largest flag of any device
    on any rank (one all-reduce of one number), so all ranks skip the same steps."""
    from zgrad.distributed.collectives.api import all_reduce, is_initialized  # loads the transport
    from zgrad.distributed.collectives.fingerprint import ReduceOp

    if not is_initialized():
        return found_inf_per_device
    any_found = max((found.item() for found in found_inf_per_device.values()), default=0)
    flag = Tensor(np.array([any_found], dtype=_FLAG))
    all_reduce(flag, op=ReduceOp.MAX)
    agreed = flag.item()
    return {device_type: Tensor(dispatch.full((1,), agreed, _FLAG, device_type))
            for device_type in found_inf_per_device}
