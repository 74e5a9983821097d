"""Element-wise casts between float32 and the 16-bit float types, on the 16-bit side's bits (uint16).

numpy casts float32 to float16 and back one element at a time, and ml_dtypes casts float32 to
bfloat16 the same way: several times slower than the memory the cast reads and writes. Autocast
and every op on a 16-bit tensor (computed in float32, see
:mod:`zgrad.kernels.half_precision`) cast on each call. These loops vectorise:

- bfloat16 is float32's upper half: widening shifts the bits; narrowing rounds to nearest, ties to
  even, on the integer bits, and makes NaN the quiet NaN of its sign: bit for bit as ml_dtypes.
- float16 goes through LLVM's ``fptrunc``/``fpext`` (IEEE rounding to nearest even, subnormals,
  overflow to inf), one vcvtps2ph/vcvtph2ps per vector where the CPU has F16C
  (:data:`FLOAT16_IN_HARDWARE`); elsewhere the callers keep numpy's cast.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.extending import intrinsic

from zgrad.kernels._jit import parallel_kernel, target_has_feature

__all__ = ["FLOAT16_IN_HARDWARE", "bfloat16_to_float32", "float16_to_float32", "float32_to_bfloat16",
           "float32_to_float16"]


FLOAT16_IN_HARDWARE = target_has_feature("f16c")


@intrinsic
def _float16_bits(typingctx, x):
    """The IEEE float16 bits (uint16) of float32 ``x`` rounded to nearest, ties to even."""
    if x == types.float32:

        def codegen(context, builder, signature, args):
            return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

        return types.uint16(x), codegen
    return None


@intrinsic
def _float16_value(typingctx, bits):
    """The float32 value of the IEEE float16 ``bits`` (uint16): exact."""
    if bits == types.uint16:

        def codegen(context, builder, signature, args):
            return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

        return types.float32(bits), codegen
    return None


@parallel_kernel()
def float32_to_bfloat16(x, out):
    """out[i] = the bfloat16 bits of float32 x[i]: nearest, ties to even; NaN becomes the quiet NaN
    of its sign."""
    bits = x.view(np.uint32)
    for i in prange(x.size):
        b = bits[i]
        if x[i] != x[i]:
            out[i] = np.uint16(((b >> np.uint32(16)) & np.uint32(0x8000)) | np.uint32(0x7FC0))
        else:
            out[i] = np.uint16((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))


@parallel_kernel()
def bfloat16_to_float32(bits, out):
    """out[i] = the float32 value of bfloat16 bits[i] (exact)."""
    wide = out.view(np.uint32)
    for i in prange(bits.size):
        wide[i] = np.uint32(bits[i]) << np.uint32(16)


@parallel_kernel()
def float32_to_float16(x, out):
    """out[i] = the float16 bits of float32 x[i] (IEEE rounding; needs F16C to vectorise)."""
    for i in prange(x.size):
        out[i] = _float16_bits(x[i])


@parallel_kernel()
def float16_to_float32(bits, out):
    """out[i] = the float32 value of float16 bits[i] (exact)."""
    for i in prange(bits.size):
        out[i] = _float16_value(bits[i])
