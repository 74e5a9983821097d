"""``zgrad.backends.cudnn``: PyTorch's cuDNN switches.

zgrad's CUDA backend never calls cuDNN (convolutions are im2col and cuBLAS products), so
:func:`is_available` is False and ``enabled``, ``benchmark`` and ``deterministic`` are kept only
so programs that set them run: as in PyTorch on a machine without cuDNN, they change no result.
``allow_tf32`` does what PyTorch's does: float32 convolutions may run their products in TF32 on
the GPU's tensor cores, True by default as in PyTorch (set it to False for full float32
convolutions; matrix products follow ``zgrad.backends.cuda.matmul.allow_tf32`` instead).
"""

from __future__ import annotations

import sys
import types

from zgrad.kernels import matmul_precision

__all__ = ["allow_tf32", "benchmark", "deterministic", "enabled", "is_available", "version"]

enabled = True
benchmark = False
deterministic = False
allow_tf32: bool  # read and set through _CudnnModule (below)


def is_available() -> bool:
    """False: zgrad has no cuDNN (its CUDA backend runs its own kernels and cuBLAS)."""
    return False


def version() -> None:
    """None, as PyTorch answers without cuDNN."""
    return None


class _CudnnModule(types.ModuleType):
    """This module, with ``allow_tf32`` read and set through the kernel layer's switch."""

    @property
    def allow_tf32(self) -> bool:
        """Whether float32 convolutions may run their products in TF32 on the GPU."""
        return matmul_precision.convolution_allow_tf32()

    @allow_tf32.setter
    def allow_tf32(self, flag: bool) -> None:
        matmul_precision.set_convolution_allow_tf32(bool(flag))


sys.modules[__name__].__class__ = _CudnnModule
