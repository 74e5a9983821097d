"""``zgrad.cuda``: whether CUDA can be used here, how many devices, waiting for queued work, and
the CUDA default generator's seed and state, as ``torch.cuda``.

CUDA work runs on a GPU found by the driver, or on Numba's CUDA simulator when
``NUMBA_ENABLE_CUDASIM=1`` was set before zgrad (and numba) were imported. Nothing here loads
the CUDA backend until called.
"""

from __future__ import annotations

from zgrad.kernels import dispatch
from zgrad.random import cuda_default_generator
from zgrad.tensor import Tensor

__all__ = ["is_available", "device_count", "synchronize", "current_device", "get_device_name", "default_generators",
           "get_rng_state", "initial_seed", "manual_seed", "manual_seed_all", "seed", "seed_all", "set_rng_state"]

default_generators = (cuda_default_generator,)
"""The CUDA default generators, one per device as in PyTorch (zgrad computes on one device)."""


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


def manual_seed(seed: int) -> None:
    """Seed the CUDA default generator (``zgrad.manual_seed`` seeds it and the CPU's).

    Raises:
        TypeError: ``seed`` is not an int.
        ValueError: ``seed`` is outside [-2**63, 2**64).
    """
    cuda_default_generator.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed the CUDA default generator of every device (zgrad has one): :func:`manual_seed`."""
    manual_seed(seed)


def seed() -> None:
    """Seed the CUDA default generator from the OS (non-deterministic)."""
    cuda_default_generator.seed()


def seed_all() -> None:
    """Seed the CUDA default generator of every device from the OS: :func:`seed`."""
    seed()


def initial_seed() -> int:
    """The seed the CUDA default generator's stream started from."""
    return cuda_default_generator.initial_seed()


def get_rng_state(device: object = "cuda") -> Tensor:
    """The CUDA default generator's state as a uint8 tensor (for :func:`set_rng_state`)."""
    return cuda_default_generator.get_state()


def set_rng_state(new_state: Tensor, device: object = "cuda") -> None:
    """Restore the CUDA default generator's state from :func:`get_rng_state`.

    Raises:
        TypeError: ``new_state`` is not a uint8 tensor.
        ZgradError: it is not a state a zgrad generator gave.
    """
    cuda_default_generator.set_state(new_state)
