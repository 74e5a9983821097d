"""Four elements of a 1-D array in one memory access: what the flat element-wise kernels use to
move whole 16-byte words (a float32 kernel otherwise issues one 4-byte load per element, and the
loads, not the memory, bound it).

- ``load4(a, i)``: ``(a[i], a[i + 1], a[i + 2], a[i + 3])``; ``store4(a, i, v0, v1, v2, v3)``.
  For a C-contiguous array of a boolean, integer or float dtype these are one vector access (LLVM
  ``<4 x T>`` aligned to ``4 * itemsize`` bytes, 16 at most: ``ld.global.v4.f32`` for float32);
  for any other array (a strided or zero-stride view, complex numbers), four element accesses.
- ``fits4(a)``: whether those accesses are valid at every multiple of 4: always for element
  accesses; for vector ones, when the array's first element lies on that boundary (zgrad's
  allocations do; a view starting mid-vector does not). Nothing else checks: a vector access off
  the boundary is undefined behaviour on the device.

The code generators are plain LLVM builders, registered as CUDA intrinsics here and as CPU
intrinsics by :func:`cpu_intrinsics` (the tests run the same builders on the CPU, where they can
be executed without a GPU). In the simulator, Python stand-ins with the same meaning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zgrad.kernels.cuda.kernels.common import SIMULATOR, device

__all__ = ["VECTOR", "cpu_intrinsics", "fits4", "load4", "store4"]

VECTOR = 4  # elements per access
_MAX_ALIGNMENT = 16  # bytes: the widest global load a thread issues


def _alignment(itemsize: int) -> int:
    return min(_MAX_ALIGNMENT, VECTOR * itemsize)


def _vectorizable(array_type: Any, types: Any) -> bool:
    """Whether the accesses to an array of this Numba type are vector ones."""
    return array_type.layout == "C" and isinstance(array_type.dtype, (types.Boolean, types.Integer, types.Float))


def _fits4_typer(types: Any) -> Callable:
    def typer(typingctx: Any, array: Any) -> Any:
        if not isinstance(array, types.Array) or array.ndim != 1:
            return None
        sig = types.boolean(array)

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            from llvmlite import ir
            (array_type,) = sig.args
            if not _vectorizable(array_type, types):
                return ir.Constant(ir.IntType(1), 1)  # element accesses fit anywhere
            data = context.make_array(array_type)(context, builder, args[0]).data
            address = builder.ptrtoint(data, ir.IntType(64))
            alignment = _alignment(context.get_abi_sizeof(context.get_data_type(array_type.dtype)))
            remainder = builder.and_(address, ir.Constant(ir.IntType(64), alignment - 1))
            return builder.icmp_unsigned("==", remainder, ir.Constant(ir.IntType(64), 0))

        return sig, codegen

    return typer


def _element_pointers(context: Any, builder: Any, array_type: Any, array: Any, index: Any,
                      index_type: Any, types: Any) -> list[Any]:
    """The pointers to elements index .. index + 3 of a 1-D array of any layout."""
    from llvmlite import ir
    struct = context.make_array(array_type)(context, builder, array)
    first = context.cast(builder, index, index_type, types.intp)
    stride = builder.extract_value(struct.strides, 0)
    base = builder.ptrtoint(struct.data, ir.IntType(64))
    pointers = []
    for k in range(VECTOR):
        offset = builder.mul(builder.add(first, ir.Constant(first.type, k)), stride)
        pointers.append(builder.inttoptr(builder.add(base, offset), struct.data.type))
    return pointers


def _vector_pointer(context: Any, builder: Any, array_type: Any, struct: Any, index: Any, index_type: Any,
                    types: Any) -> tuple[Any, int]:
    """(element ``index`` of C-contiguous ``struct`` as a pointer to a vector of 4, its alignment)."""
    from llvmlite import ir
    first = context.cast(builder, index, index_type, types.intp)
    element = builder.gep(struct.data, [first])
    data_type = context.get_data_type(array_type.dtype)
    vector = ir.VectorType(data_type, VECTOR)
    return builder.bitcast(element, vector.as_pointer()), _alignment(context.get_abi_sizeof(data_type))


def _load4_typer(types: Any) -> Callable:
    def typer(typingctx: Any, array: Any, index: Any) -> Any:
        if not isinstance(array, types.Array) or array.ndim != 1 or not isinstance(index, types.Integer):
            return None
        sig = types.UniTuple(array.dtype, VECTOR)(array, index)

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            from llvmlite import ir
            array_type, index_type = sig.args
            model = context.data_model_manager[array_type.dtype]
            if _vectorizable(array_type, types):
                struct = context.make_array(array_type)(context, builder, args[0])
                pointer, alignment = _vector_pointer(context, builder, array_type, struct, args[1], index_type, types)
                vector = builder.load(pointer, align=alignment)
                raw = [builder.extract_element(vector, ir.Constant(ir.IntType(32), k)) for k in range(VECTOR)]
            else:
                pointers = _element_pointers(context, builder, array_type, args[0], args[1], index_type, types)
                raw = [builder.load(p) for p in pointers]
            values = [model.from_data(builder, r) for r in raw]
            return context.make_tuple(builder, sig.return_type, values)

        return sig, codegen

    return typer


def _store4_typer(types: Any) -> Callable:
    def typer(typingctx: Any, array: Any, index: Any, v0: Any, v1: Any, v2: Any, v3: Any) -> Any:
        if not isinstance(array, types.Array) or array.ndim != 1 or not isinstance(index, types.Integer):
            return None
        sig = types.void(array, index, v0, v1, v2, v3)

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            from llvmlite import ir
            array_type, index_type = sig.args[:2]
            dtype = array_type.dtype
            model = context.data_model_manager[dtype]
            values = [model.as_data(builder, context.cast(builder, v, t, dtype)) for v, t in zip(args[2:], sig.args[2:])]
            if _vectorizable(array_type, types):
                struct = context.make_array(array_type)(context, builder, args[0])
                pointer, alignment = _vector_pointer(context, builder, array_type, struct, args[1], index_type, types)
                vector = ir.Constant(pointer.type.pointee, ir.Undefined)
                for k, value in enumerate(values):
                    vector = builder.insert_element(vector, value, ir.Constant(ir.IntType(32), k))
                builder.store(vector, pointer, align=alignment)
            else:
                pointers = _element_pointers(context, builder, array_type, args[0], args[1], index_type, types)
                for value, pointer in zip(values, pointers):
                    builder.store(value, pointer)
            return context.get_dummy_value()

        return sig, codegen

    return typer


def cpu_intrinsics() -> tuple[Any, Any, Any]:
    """(fits4, load4, store4) built by the same code generators for Numba's CPU target (for
    tests: the CUDA ones can only be compiled without a GPU, not run)."""
    from numba.core import types
    from numba.core.extending import intrinsic
    return intrinsic(_fits4_typer(types)), intrinsic(_load4_typer(types)), intrinsic(_store4_typer(types))


if SIMULATOR:
    @device
    def fits4(array):
        """Whether load4 and store4 are valid at every multiple of 4: the simulator's stand-in (an
        array that the device would access element by element fits; a vector-accessed one must
        start on the boundary)."""
        if array.strides[0] != array.itemsize or array.dtype.kind not in "biuf":
            return True
        return array.ctypes.data % _alignment(array.itemsize) == 0

    @device
    def load4(array, i):
        """array[i], array[i + 1], array[i + 2], array[i + 3]: the simulator's stand-in."""
        return array[i], array[i + 1], array[i + 2], array[i + 3]

    @device
    def store4(array, i, v0, v1, v2, v3):
        """array[i:i + 4] = v0, v1, v2, v3: the simulator's stand-in."""
        array[i], array[i + 1], array[i + 2], array[i + 3] = v0, v1, v2, v3
else:
    from numba import types as _types
    from numba.cuda.extending import intrinsic as _intrinsic

    fits4 = _intrinsic(_fits4_typer(_types))
    load4 = _intrinsic(_load4_typer(_types))
    store4 = _intrinsic(_store4_typer(_types))
