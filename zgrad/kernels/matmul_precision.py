"""How float32 matrix products may round on a GPU: PyTorch's ``allow_tf32`` switch and its
``float32_matmul_precision``, kept here (in the kernel layer) so the CUDA backend can read them.

"highest" (the default, as PyTorch's) keeps full float32 products. "high" and "medium" let cuBLAS
run float32 products on the tensor cores in TF32 (10 bits of mantissa in the products, float32
accumulation), as PyTorch does for "high"; zgrad treats "medium" as "high". The CPU backend
ignores the setting (OpenBLAS has no reduced-precision float32 product).
"""

from __future__ import annotations

__all__ = ["PRECISIONS", "allow_tf32", "float32_matmul_precision", "set_allow_tf32", "set_float32_matmul_precision"]

PRECISIONS = ("highest", "high", "medium")

_precision = ["highest"]


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
