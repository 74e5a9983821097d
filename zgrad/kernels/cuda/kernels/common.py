"""What the CUDA kernel modules of this package share: the one ``cuda.jit`` wrapper with zgrad's
options, the math module kernels call, and the warp shuffle (with its simulator stand-in).

Options, and why:

- no ``fastmath``: it flushes denormals and assumes no NaN/inf, which breaks the NaN and inf rules
  the CPU backend follows (and the op tests check);
- float constants inside kernels are typed with the output's dtype (``T = out.dtype.type``,
  ``T(0.5)``): a Python float literal would make a float32 kernel compute in float64.

In the simulator (``NUMBA_ENABLE_CUDASIM=1``) kernels run as Python, where ``math.exp(1000.0)``
raises and ``math.log(-1.0)`` raises; :mod:`simulator_math` stands in for ``math``
there with numpy's IEEE results (inf, NaN), as a GPU gives them, in the argument's own dtype.

Kernels are decorated when their module is imported, which compiles nothing: Numba compiles a
kernel on its first launch for the argument types it gets.
"""

from __future__ import annotations

from typing import Any, Callable

from numba import cuda

__all__ = ["SIMULATOR", "WARP", "math", "kernel", "device", "shuffle_xor"]

SIMULATOR = cuda.jit.__module__.startswith("numba.cuda.simulator")  # what numba.cuda became at import

if SIMULATOR:
    from zgrad.kernels.cuda.kernels import simulator_math as math
else:
    import math  # noqa: F401 - re-exported for the kernel modules


def kernel(py_func: Callable) -> Any:
    """A CUDA kernel with zgrad's options (see the module docstring)."""
    return cuda.jit(py_func)


def device(py_func: Callable) -> Any:
    """A CUDA device function with zgrad's options."""
    return cuda.jit(py_func, device=True)


WARP = 32  # threads per warp on every CUDA device


if SIMULATOR:
    @device
    def shuffle_xor(value, lane_mask):
        """The simulator's stand-in for ``cuda.shfl_xor_sync`` over a full warp (the simulator has
        no warp intrinsics): the value of the thread whose index differs from this one's in the
        bits of ``lane_mask``. Every thread of the block must call it, as every lane of a warp
        must call the intrinsic; the block's barrier stands in for the warp's. The values meet in
        a dict on the launch's simulated ``cuda`` module (the simulator runs one block at a time;
        its shared arrays are looked up from the caller's stack, far slower)."""
        slots = cuda.__dict__.setdefault("zgrad_shuffle_slots", {})
        t = cuda.threadIdx.x
        slots[t] = value
        cuda.syncthreads()
        partner = t ^ lane_mask
        if partner >= cuda.blockDim.x or lane_mask >= WARP:
            raise ValueError(f"shuffle_xor: lane {t} has no partner {partner} in its warp (a real GPU's result "
                             "would be undefined)")
        result = slots[partner]
        cuda.syncthreads()
        return result
else:
    @device
    def shuffle_xor(value, lane_mask):
        """The value of the lane whose index differs from this one's in the bits of ``lane_mask``
        (every lane of the warp takes part)."""
        return cuda.shfl_xor_sync(0xFFFFFFFF, value, lane_mask)
