"""How float32 matrix products may round on a GPU: PyTorch's ``allow_tf32`` switches and its
``float32_matmul_precision``, kept here (in the kernel layer) so the CUDA backend can read them.

Matrix products: "highest" (the default, as PyTorch's) keeps full float32 products. "high" and
"medium" let cuBLAS run float32 products on the tensor cores in TF32 (10 bits of mantissa in the
products, float32 accumulation), as PyTorch does for "high"; zgrad treats "medium" as "high".

Convolutions follow their own switch, PyTorch's ``backends.cudnn.allow_tf32``, which is on by
default there (convolutions are where TF32 costs the least accuracy for the most speed): zgrad's
convolution products run in TF32 unless it is turned off. The CPU backend ignores both (OpenBLAS
has no reduced-precision float32 product).
"""

from __future__ import annotations

__all__ = ["PRECISIONS", "allow_tf32", "convolution_allow_tf32", "float32_matmul_precision", "set_allow_tf32",
           "set_convolution_allow_tf32", "set_float32_matmul_precision"]

PRECISIONS = ("highest", "high", "medium")

_precision = ["highest"]
_convolution_tf32 = [True]


def float32_matmul_precision() -> str:
    """The current float32 matrix-product precision: "highest", "high" or "medium"."""
    return _precision[0]


def set_float32_matmul_precision(precision: str) -> None:
    """Set the float32 matrix-product precision (PyTorch's names and meanings).

    Raises:
        RuntimeError: ``precision`` is not one of :data:`PRECISIONS`.
    """
    if precision not in PRECISIONS:
        raise RuntimeError(f"Invalid precision {precision!r}: expected one of {', '.join(map(repr, PRECISIONS))}")
    _precision[0] = precision


def allow_tf32() -> bool:
    """Whether float32 products may run in TF32 on the GPU (any precision but "highest")."""
    return _precision[0] != "highest"


def set_allow_tf32(flag: bool) -> None:
    """PyTorch's ``backends.cuda.matmul.allow_tf32 = flag``: "high" when set, "highest" when not."""
    _precision[0] = "high" if flag else "highest"


def convolution_allow_tf32() -> bool:
    """Whether float32 convolutions may run their products in TF32 on the GPU (PyTorch's
    ``backends.cudnn.allow_tf32``; True by default, as there)."""
    return _convolution_tf32[0]


def set_convolution_allow_tf32(flag: bool) -> None:
    """PyTorch's ``backends.cudnn.allow_tf32 = flag``."""
    _convolution_tf32[0] = bool(flag)
