"""``nn.DataParallel`` and ``nn.parallel.data_parallel``: PyTorch's single-process data
parallelism, for the programs that wrap their model in it.

zgrad computes on one device per process (data parallelism across devices is
``DistributedDataParallel``, one process per GPU), so the wrapper does what PyTorch's does with one
device or none: without CUDA it calls the module as it is; with it, it moves the module to device 0
once, and each call's tensors (inside tuples, lists and dicts) to it, differentiably.
"""

from __future__ import annotations

from typing import Any, Sequence

from zgrad import cuda
from zgrad.device import Device, usable_cuda_device
from zgrad.nn.module import Module
from zgrad.tensor import Tensor

__all__ = ["DataParallel", "data_parallel"]


def _device_indices(device_ids: Sequence[Any] | None) -> list[int]:
    """The CUDA device indices ``device_ids`` names (every device when None), each one checked."""
    if device_ids is None:
        return list(range(cuda.device_count()))
    return [usable_cuda_device(_as_cuda_spec(d)).index or 0 for d in device_ids]


def _as_cuda_spec(device: Any) -> Any:
    return f"cuda:{device}" if isinstance(device, int) else device


def _to_device(value: Any, device: Device) -> Any:
    """``value`` with every tensor in it (through tuples, lists and dicts) moved to ``device``."""
    if isinstance(value, Tensor):
        return value.to(device)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_to_device(v, device) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_to_device(v, device) for v in value)
    if isinstance(value, dict):
        return type(value)((k, _to_device(v, device)) for k, v in value.items())
    return value


def _check_on_device(module: Module, device: Device) -> None:
    for tensor in (*module.parameters(), *module.buffers()):
        if tensor.device != device:
            raise RuntimeError(f"module must have its parameters and buffers on device {device} (device_ids[0]) but "
                               f"found one of them on device: {tensor.device}")


class DataParallel(Module):
    """Run ``module`` on the CUDA device, or as it is where there is none (PyTorch's wrapper).

    Args:
        module: the module to wrap (its state dict's keys gain the prefix ``module.``).
        device_ids: the CUDA devices to use (indices or devices); every device by default. zgrad
            uses one device per process, so at most device 0.
        output_device: where outputs go (device_ids[0] by default; with one device PyTorch
            leaves them there, and so does zgrad).
        dim: the dimension PyTorch splits inputs along across devices.

    Raises:
        ZgradError: a device id other than 0, or CUDA ids where no CUDA device can be used.
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
            self.output_device = usable_cuda_device(_as_cuda_spec(self.device_ids[0] if output_device is None
                                                                  else output_device)).index
            self.src_device_obj = Device("cuda", self.device_ids[0])
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
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    kwargs = module_kwargs or {}
    ids = _device_indices(device_ids)
    if not ids:
        return module(*inputs, **kwargs)
    device = Device("cuda", ids[0])
    _check_on_device(module, device)
    return module(*_to_device(inputs, device), **_to_device(kwargs, device))
