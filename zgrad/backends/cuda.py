"""``zgrad.backends.cuda``: PyTorch's switches for CUDA matrix products.

``matmul.allow_tf32`` (default False, as PyTorch's) lets cuBLAS run float32 products in TF32 on
the tensor cores; it is another view of :func:`zgrad.set_float32_matmul_precision` ("high" when
set, "highest" when not). ``allow_fp16_reduced_precision_reduction`` and
``allow_bf16_reduced_precision_reduction`` are kept so programs that set them run: zgrad's
half-precision products always accumulate in float32.
"""

from __future__ import annotations

from zgrad.kernels import matmul_precision

__all__ = ["is_built", "matmul"]


class _MatmulSwitches:
    """``zgrad.backends.cuda.matmul``."""

    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self) -> bool:
        """Whether float32 products may run in TF32 on the GPU."""
        return matmul_precision.allow_tf32()

    @allow_tf32.setter
    def allow_tf32(self, flag: bool) -> None:
        matmul_precision.set_allow_tf32(bool(flag))


matmul = _MatmulSwitches()


def is_built() -> bool:
    """True: zgrad's CUDA backend is part of every install (it needs ``zgrad[cuda]`` and a GPU to run)."""
    return True
