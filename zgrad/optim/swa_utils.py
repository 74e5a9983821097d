"""``zgrad.optim.swa_utils``: stochastic weight averaging (SWA) and exponential moving averages
(EMA) of a model's weights, as ``torch.optim.swa_utils`` (PyTorch 2.13).

:class:`AveragedModel` keeps a copy of a module whose parameters (and, with ``use_buffers``,
buffers) are running averages of another module's; the ``get_*_avg_fn`` factories build the
averaging rules it takes; :func:`update_bn` recomputes BatchNorm statistics for averaged weights;
:class:`SWALR` anneals the learning rate to a constant for the averaging phase.

Example::

    swa_model = zgrad.optim.swa_utils.AveragedModel(model)
    swa_scheduler = zgrad.optim.swa_utils.SWALR(optimizer, swa_lr=0.05)
    for epoch in range(epochs):
        train_one_epoch(model, optimizer)
        if epoch >= swa_start:
            swa_model.update_parameters(model)
            swa_scheduler.step()
    zgrad.optim.swa_utils.update_bn(loader, swa_model)
"""

from __future__ import annotations

import itertools
from copy import deepcopy
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from zgrad.creation import tensor
from zgrad.engine.grad_mode import no_grad
from zgrad.nn.module import Module
from zgrad.nn.norm import _BatchNorm, _InstanceNorm
from zgrad.optim.lr_scheduler.swa import SWALR
from zgrad.tensor import Tensor

__all__ = ["AveragedModel", "SWALR", "get_ema_avg_fn", "get_ema_multi_avg_fn", "get_swa_avg_fn",
           "get_swa_multi_avg_fn", "update_bn"]

AvgFn = Callable[[Tensor, Tensor, "Tensor | int"], Tensor]
MultiAvgFn = Callable[[Sequence[Tensor], Sequence[Tensor], "Tensor | int"], None]
# Devices where PyTorch's default average takes its multi-tensor (lerp) route; elsewhere the per-tensor one.
_MULTI_TENSOR_DEVICE_TYPES = ("cuda",)


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def _lerp_supported(tensor: Tensor) -> bool:
    return tensor.is_floating_point() or tensor.is_complex()


def get_ema_multi_avg_fn(decay: float = 0.999) -> MultiAvgFn:
    """An in-place EMA over lists of tensors: ``ema = decay * ema + (1 - decay) * current``
    (``lerp`` towards ``current`` by ``1 - decay`` for floating and complex tensors).

    Args:
        decay: the weight of the running average, in [0, 1].

    Returns:
        ``fn(ema_tensors, current_tensors, num_averaged)``, updating ``ema_tensors`` in place.

    Raises:
        ValueError: ``decay`` outside [0, 1].
    """
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param_list: Sequence[Tensor], current_param_list: Sequence[Tensor], _: Any) -> None:
        if _lerp_supported(ema_param_list[0]):
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                p_ema.lerp_(p_model, 1 - decay)
        else:
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> MultiAvgFn:
    """An in-place equal-weight running mean over lists of tensors: ``avg += (current - avg) / (n + 1)``,
    as a ``lerp`` by ``1 / (n + 1)`` (a float32 weight when ``n`` is a tensor, as PyTorch's).

    Returns:
        ``fn(averaged_tensors, current_tensors, num_averaged)``, updating ``averaged_tensors`` in place;
        it raises RuntimeError for integer tensors, as PyTorch's does.
    """

    @no_grad()
    def swa_update(averaged_param_list: Sequence[Tensor], current_param_list: Sequence[Tensor],
                   num_averaged: Tensor | int) -> None:
        if not _lerp_supported(averaged_param_list[0]):
            raise RuntimeError(f"get_swa_multi_avg_fn: cannot average {averaged_param_list[0].dtype} tensors in place "
                               "(integer division); average floating-point tensors, or pass avg_fn=get_swa_avg_fn()")
        weight = float(1 / (num_averaged + 1))
        for p_averaged, p_model in zip(averaged_param_list, current_param_list, strict=True):
            p_averaged.lerp_(p_model, weight)

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> AvgFn:
    """The EMA of one tensor: returns ``decay * ema + (1 - decay) * current``.

    Args:
        decay: the weight of the running average, in [0, 1].

    Raises:
        ValueError: ``decay`` outside [0, 1].
    """
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> AvgFn:
    """The equal-weight running mean of one tensor: returns ``avg + (current - avg) / (n + 1)``."""

    @no_grad()
    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged: Tensor | int) -> Tensor:
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


def _group_by_device_and_dtype(averaged: list[Tensor], current: list[Tensor]) -> dict[tuple, tuple[list, list]]:
    groups: dict[tuple, tuple[list, list]] = {}
    for p_averaged, p_model in zip(averaged, current, strict=True):
        mine, theirs = groups.setdefault((p_averaged.device, p_averaged.dtype), ([], []))
        mine.append(p_averaged)
        theirs.append(p_model)
    return groups


class AveragedModel(Module):
    """A copy of ``model`` whose weights are running averages of ``model``'s (SWA or EMA), as
    ``torch.optim.swa_utils.AveragedModel``.

    :meth:`update_parameters` copies ``model``'s parameters on its first call and averages them in
    on every later one, with ``avg_fn`` (per tensor), ``multi_avg_fn`` (per list of tensors of one
    device and dtype) or, by default, an equal-weight mean. With ``use_buffers`` the buffers are
    averaged the same way; otherwise they are copied from ``model`` each time. The state dict holds
    the copy under ``module.`` and the count as ``n_averaged``, PyTorch's keys; the averaging
    functions are not saved. ``forward`` calls the copy.

    Args:
        model: the module to average.
        device: where to keep the copy (default: where ``model`` is).
        avg_fn: ``fn(averaged, current, num_averaged) -> Tensor``, or None.
        multi_avg_fn: ``fn(averaged_list, current_list, num_averaged)`` updating in place, or None.
        use_buffers: average the buffers too.

    Raises:
        AssertionError: both ``avg_fn`` and ``multi_avg_fn`` given (PyTorch's type).
    """

    def __init__(self, model: Module, device: Any = None, avg_fn: AvgFn | None = None,
                 multi_avg_fn: MultiAvgFn | None = None, use_buffers: bool = False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=np.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The averaged copy's forward."""
        return self.module(*args, **kwargs)

    def _averaged_and_current(self, model: Module) -> tuple[Iterable[Tensor], Iterable[Tensor]]:
        if self.use_buffers:
            return (itertools.chain(self.module.parameters(), self.module.buffers()),
                    itertools.chain(model.parameters(), model.buffers()))
        return self.parameters(), model.parameters()

    @no_grad()
    def update_parameters(self, model: Module) -> None:
        """Average ``model``'s parameters (and, with ``use_buffers``, buffers) into this copy, in
        ``model``'s parameter order; the first call copies them. Increments ``n_averaged``.

        Raises:
            ValueError: without ``use_buffers``, ``model`` has a different number of buffers.
        """
        averaged_tensors, current_tensors = self._averaged_and_current(model)
        averaged: list[Tensor] = []
        current: list[Tensor] = []
        first = bool(self.n_averaged == 0)
        for p_averaged, p_model in zip(averaged_tensors, current_tensors, strict=False):
            p_model_ = p_model.detach().to(p_averaged.device)
            averaged.append(p_averaged.detach())
            current.append(p_model_)
            if first:
                p_averaged.detach().copy_(p_model_)
        if not first:
            self._average(averaged, current)
        if not self.use_buffers:  # keep the buffers in step with the source model
            for b_swa, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                b_swa.detach().copy_(b_model.detach().to(b_swa.device))
        self.n_averaged += 1

    def _average(self, averaged: list[Tensor], current: list[Tensor]) -> None:
        if self.avg_fn is not None:
            for p_averaged, p_model in zip(averaged, current, strict=True):
                p_averaged.copy_(self.avg_fn(p_averaged, p_model, self.n_averaged.to(p_averaged.device)))
            return
        for (device, _), (mine, theirs) in _group_by_device_and_dtype(averaged, current).items():
            n_averaged = self.n_averaged.to(device)
            if self.multi_avg_fn is not None:
                self.multi_avg_fn(mine, theirs, n_averaged)
            elif device.type in _MULTI_TENSOR_DEVICE_TYPES:
                get_swa_multi_avg_fn()(mine, theirs, n_averaged)
            else:
                avg_fn = get_swa_avg_fn()
                for p_averaged, p_model in zip(mine, theirs, strict=True):
                    p_averaged.copy_(avg_fn(p_averaged, p_model, n_averaged))


def _batch_norms(model: Module) -> list[_BatchNorm]:
    """The BatchNorm layers of ``model`` (zgrad's InstanceNorm shares their base; PyTorch's does not)."""
    return [m for m in model.modules() if isinstance(m, _BatchNorm) and not isinstance(m, _InstanceNorm)]


@no_grad()
def update_bn(loader: Iterable[Any], model: Module, device: Any = None) -> None:
    """Recompute the running statistics of every BatchNorm layer of ``model`` with one pass over
    ``loader``: the statistics are reset and averaged over all batches equally (momentum None),
    in training mode; the layers' momenta and the model's mode are restored afterwards. Blocks for
    the pass; does nothing if ``model`` has no BatchNorm layer.

    Args:
        loader: batches, each a tensor or a list or tuple whose first element is the input tensor.
        model: the module (an :class:`AveragedModel`, typically).
        device: if given, each input is moved there first.
    """
    momenta = {}
    for module in _batch_norms(model):
        module.reset_running_stats()
        momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)
