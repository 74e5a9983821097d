"""``nn.DataParallel`` and ``nn.parallel.data_parallel``: PyTorch's single-process data
parallelism, for the programs that wrap their model in it.

zgrad computes on one device per process (data parallelism across devices is
``DistributedDataParallel``, one process per GPU), so the wrapper does what PyTorch's does with one
device or none: without CUDA it calls the module as it is; with it, it moves the module to device 0
once, and each call's tensors (inside tuples, lists and dicts) to it, differentiably.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

from zgrad import cuda
from zgrad.device import Device, as_device, usable_cuda_device
from zgrad.errors import ZgradError
from zgrad.nn.module import Module
from zgrad.utils.tensor_tree import replace_tensors, tensors_in

__all__ = ["DataParallel", "data_parallel"]


def _device_indices(device_ids: Sequence[Any] | None) -> list[int]:
    """The devices to compute on: none without CUDA (``device_ids`` are then ignored, as
    PyTorch ignores them), else device 0, which ``device_ids`` (every device when None) must
    start with; the others are checked and left unused, with a warning."""
    if not cuda.device_count():
        return []
    if device_ids is None:
        device_ids = list(range(cuda.device_count()))
    indices = [_index_of(d) for d in device_ids]
    if indices and indices[0] != 0:
        usable_cuda_device(f"cuda:{indices[0]}")  # raises: zgrad computes on cuda:0
    if len(indices) > 1:
        warnings.warn(f"zgrad computes on one CUDA device per process: DataParallel runs the whole batch on cuda:0 "
                      f"and leaves devices {indices[1:]} unused; start one process per GPU with "
                      "DistributedDataParallel to use them", UserWarning, stacklevel=3)
    return indices[:1]


def _index_of(device: Any) -> int:
    """The index of a CUDA device given as an int, a string or a device (checked to exist)."""
    named = as_device(f"cuda:{device}" if isinstance(device, int) else device)
    if named.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {device}")
    index = named.index or 0
    if index >= cuda.device_count():
        raise ZgradError(f"CUDA error: invalid device ordinal: cuda:{index} requested, {cuda.device_count()} "
                         "device(s) present")
    return index


def _to_device(value: Any, device: Device) -> Any:
    """``value`` with every tensor in it (through tuples, lists, dicts and dataclasses) moved to ``device``."""
    return replace_tensors(value, (t.to(device) for t in tensors_in(value)))


def _check_on_device(module: Module, device: Device) -> None:
    for tensor in (*module.parameters(), *module.buffers()):
        if tensor.device != device:
            raise RuntimeError(f"module must have its parameters and buffers on device {device} (device_ids[0]) but "
                               f"found one of them on device: {tensor.device}")


class DataParallel(Module):
    """Run ``module`` on the CUDA device, or as it is where there is none (PyTorch's wrapper).

    Args:
        module: the module to wrap (its state dict's keys gain the prefix ``module.``).
        device_ids: the CUDA devices to use (indices or devices); every device by default; ignored
            without CUDA. zgrad uses one device per process: the first must be device 0, and the
            others are left unused, with a warning.
        output_device: where outputs go (device_ids[0] by default; with one device PyTorch
            leaves them there, and so does zgrad).
        dim: the dimension PyTorch splits inputs along across devices.

    Raises:
        ZgradError: a device id past the last device, or a first one other than 0.
        RuntimeError: at a call, the module's parameters or buffers are no longer on device_ids[0]
            (PyTorch's message).
    """

    def __init__(self, module: Module, device_ids: Sequence[Any] | None = None, output_device: Any = None,
                 dim: int = 0) -> None:
        super().__init__()
        self.module = module
        self.dim = dim
        self.device_ids = _device_indices(device_ids)
        self.output_device = None
        self.src_device_obj = None
        if self.device_ids:
            self.output_device = 0 if output_device is None else _index_of(output_device)
            self.src_device_obj = Device("cuda", 0)
            module.to(self.src_device_obj)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        _check_on_device(self.module, self.src_device_obj)
        return self.module(*_to_device(inputs, self.src_device_obj), **_to_device(kwargs, self.src_device_obj))


def data_parallel(module: Module, inputs: Any, device_ids: Sequence[Any] | None = None, output_device: Any = None,
                  dim: int = 0, module_kwargs: dict[str, Any] | None = None) -> Any:
    """Call ``module`` on ``inputs`` (a tuple of arguments, or one argument) as
    :class:`DataParallel` would, without wrapping it: on the CUDA device when there is one (the
    module must already be on device_ids[0]), as it is otherwise.

    Raises:
        RuntimeError: the module's parameters or buffers are not on device_ids[0] (PyTorch's message).
    """
    kwargs = module_kwargs or {}
    ids = _device_indices(device_ids)
    if not ids:
        return module(*inputs if isinstance(inputs, tuple) else (inputs,), **kwargs)
    inputs = inputs if isinstance(inputs, tuple) else () if inputs is None else (inputs,)
    device = Device("cuda", ids[0])
    _check_on_device(module, device)
    return module(*_to_device(inputs, device), **_to_device(kwargs, device))
