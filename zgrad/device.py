"""Where a tensor's data lives."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zgrad.errors import DeviceError, ZgradError
from zgrad.kernels import dispatch

__all__ = ["Device", "as_device", "check_supported", "cuda_device", "is_device_index", "usable_cuda_device"]


# PyTorch's device types: a device object may name any (``zgrad.device("mps")`` in a device-choosing
# idiom); zgrad's tensors live on "cpu" and "cuda" only
DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia", "xla",
                "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


@dataclass(frozen=True)
class Device:
    """A device such as ``cpu`` or ``cuda:0``; compares equal to its string form."""

    type: str
    index: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.type, str):
            if self.index is not None or not is_device_index(self.type):
                raise TypeError(f"device() expects a device type string and an optional index, or an index; got "
                                f"{self.type!r}" + ("" if self.index is None else f", {self.index!r}"))
            parsed = as_device(self.type)  # ``device(0)``: an index of the accelerator, as torch.device
            object.__setattr__(self, "type", parsed.type)
            object.__setattr__(self, "index", parsed.index)
        if self.index is not None:
            if not is_device_index(self.index):
                raise TypeError(f"device() expects an integer index, got {self.index!r}")
            if self.index < 0:
                raise RuntimeError("Device index must not be negative")
            object.__setattr__(self, "index", int(self.index))
        # ``device("cuda:1")`` parses like ``device("cuda", 1)``, as torch.device does
        if self.index is None and ":" in self.type:
            parsed = as_device(self.type)
            object.__setattr__(self, "type", parsed.type)
            object.__setattr__(self, "index", parsed.index)
        if self.type not in DEVICE_TYPES:
            raise DeviceError(f"Expected one of {', '.join(DEVICE_TYPES)} device type at start of device string: "
                              f"{self.type}")

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device(type={self.type!r}" + ("" if self.index is None else f", index={self.index}") + ")"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = as_device(other)
        if not isinstance(other, Device):
            return NotImplemented
        return self.type == other.type and (self.index or 0) == (other.index or 0)

    def __hash__(self) -> int:
        return hash((self.type, self.index or 0))


CPU = Device("cpu")


def as_device(spec: "str | int | Device") -> Device:
    """Parse ``"cpu"``, ``"cuda"``, ``"cuda:1"``, an index of the accelerator (``1`` is
    ``cuda:1``, as PyTorch reads it) or pass a :class:`Device` through.

    Raises:
        DeviceError: an unknown device string (a RuntimeError and a ValueError). RuntimeError: a
            negative index.
    """
    if isinstance(spec, Device):
        return spec
    if is_device_index(spec):
        if spec < 0:
            raise RuntimeError("Device index must not be negative")
        return Device("cuda", int(spec))
    if not isinstance(spec, str):
        raise TypeError(f"expected a device string like 'cpu' or 'cuda:0', got {type(spec).__name__}")
    kind, _, index = spec.partition(":")
    if kind not in ("cpu", "cuda") or (index and not index.isdigit()):
        raise DeviceError(f"Expected one of cpu, cuda device type at start of device string: {spec}")
    return Device(kind, int(index) if index else None)


def cuda_device(spec: "str | int | Device | None") -> Device:
    """The CUDA device ``spec`` names for ``.cuda(spec)`` (None: the current one).

    Raises:
        ZgradError: ``spec`` names another device type.
    """
    device = Device("cuda") if spec is None else as_device(spec)
    if device.type != "cuda":
        raise ZgradError(f"Invalid device, must be cuda device (got {device})")
    return device


def is_device_index(value: object) -> bool:
    """Whether ``value`` is an integer (a Python or numpy one, not a bool) that PyTorch reads as a
    device index."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_supported(spec: "str | int | Device") -> Device:
    """The device ``spec`` names, if zgrad can hold tensors there (loading the CUDA backend on the
    first CUDA device named).

    Raises:
        ZgradError: a CUDA device where none can be used (no driver or device: the message says
            how to run on Numba's simulator instead), or a device index past the last device.
        ValueError: an unknown device string.
    """
    device = as_device(spec)
    if device.type == "cuda":
        count = int(dispatch.backend("cuda").device_count())
        if (device.index or 0) >= count:
            raise ZgradError(f"CUDA error: invalid device ordinal: {device} requested, {count} device(s) present")
        if device.index:
            raise ZgradError(f"{device} requested: zgrad uses one CUDA device per process, cuda:0 (start one process "
                             f"per GPU and select it with CUDA_VISIBLE_DEVICES, e.g. CUDA_VISIBLE_DEVICES={device.index})")
    return device


def usable_cuda_device(spec: "str | int | Device") -> Device:
    """The CUDA device ``spec`` names, once :func:`check_supported` found it usable.

    Raises:
        ValueError: ``spec`` names another device type, or is an unknown device string.
        ZgradError: as :func:`check_supported`.
    """
    device = check_supported(spec)
    if device.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {spec}")
    return device
