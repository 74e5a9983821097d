"""Which backends this build offers, PyTorch's names for them, and whether a launcher started us.

Every process group runs over zgrad's mesh; ``"gloo"`` and ``"nccl"`` are accepted as names for
it (a PyTorch program passes one of them), so gloo counts as available and NCCL, a library zgrad
does not ship, does not.
"""

from __future__ import annotations

from typing import Any

from zgrad.distributed.collectives.env import launched_by_torchelastic

__all__ = ["get_default_backend_for_device", "is_available", "is_gloo_available", "is_mpi_available",
           "is_nccl_available", "is_torchelastic_launched"]

_DEFAULT_BACKENDS = {"cpu": "gloo", "cuda": "nccl"}


def is_gloo_available() -> bool:
    """True: ``init_process_group("gloo")`` runs on zgrad's mesh."""
    return True


def is_nccl_available() -> bool:
    """False: zgrad ships no NCCL (``"nccl"`` is still accepted as a name for the mesh)."""
    return False


def is_available() -> bool:
    """True: zgrad's distributed package (collectives, RPC, distributed autograd) is always built in."""
    return True


def is_mpi_available() -> bool:
    """False: zgrad has no MPI backend (``mpirun`` can still start a job: see docs/launch.md)."""
    return False


def is_torchelastic_launched() -> bool:
    """Whether this process was started by ``zgrad-run`` / torchrun (``TORCHELASTIC_RUN_ID`` is set)."""
    return launched_by_torchelastic()


def get_default_backend_for_device(device: Any) -> str:
    """PyTorch's default backend name for ``device`` (a ``zgrad.device``, or a string such as
    ``"cuda:0"``): ``"gloo"`` for the CPU, ``"nccl"`` for CUDA; both name zgrad's mesh.

    Raises:
        ValueError: a device type with no default backend.
    """
    kind = getattr(device, "type", None) or str(device).split(":", 1)[0]
    if kind not in _DEFAULT_BACKENDS:
        raise ValueError(f"Default backend not registered for device : {kind}")
    return _DEFAULT_BACKENDS[kind]
