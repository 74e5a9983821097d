"""``zgrad.accelerator``: which accelerator (if any) this process can compute on, as PyTorch's.

Only CUDA is an accelerator here, and only once zgrad's CUDA backend loads and finds a device;
until then every function answers "none" and the programs that ask fall back to the CPU.
"""

from __future__ import annotations

from zgrad.device import Device
from zgrad.kernels import dispatch

__all__ = ["is_available", "current_accelerator", "device_count"]


def is_available() -> bool:
    """True only when the CUDA backend can run ops here."""
    return dispatch.backend_available("cuda")


def current_accelerator(check_available: bool = False) -> Device | None:
    """The accelerator device type (``device("cuda")``), or None when there is none."""
    return Device("cuda") if is_available() else None


def device_count() -> int:
    """How many accelerator devices this process can use (0 without one)."""
    if not is_available():
        return 0
    return int(dispatch.backend("cuda").device_count())
