"""``zgrad.cuda``: whether CUDA can be used here, how many devices, and waiting for queued work,
as ``torch.cuda``.

CUDA work runs on a GPU found by the driver, or on Numba's CUDA simulator when
``NUMBA_ENABLE_CUDASIM=1`` was set before zgrad (and numba) were imported. Nothing here loads
the CUDA backend until called.
"""

from __future__ import annotations

from zgrad.kernels import dispatch

__all__ = ["is_available", "device_count", "synchronize", "current_device", "get_device_name"]


def is_available() -> bool:
    """True when the CUDA backend loads and finds a device (or runs in the simulator)."""
    return dispatch.backend_available("cuda")


def device_count() -> int:
    """How many CUDA devices this process can use (0 without one)."""
    return int(dispatch.backend("cuda").device_count()) if is_available() else 0


def current_device() -> int:
    """The index of the device zgrad computes on (always 0: zgrad uses one device per process).

    Raises:
        ZgradError: no CUDA device can be used here.
    """
    dispatch.backend("cuda")
    return 0


def get_device_name(device: int = 0) -> str:
    """The name of CUDA device ``device`` ("Numba CUDA simulator" in the simulator).

    Raises:
        ZgradError: no CUDA device can be used here.
    """
    return str(dispatch.backend("cuda").device_properties()["name"])


def synchronize() -> None:
    """Block until every kernel and copy the calling thread queued on the device has finished.

    Raises:
        ZgradError: no CUDA device can be used here.
    """
    dispatch.backend("cuda").synchronize()
