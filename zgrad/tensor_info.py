"""What :class:`zgrad.Tensor` says about its memory and type, and the methods that change where
its memory lives: ``stride``, ``storage_offset``, ``data_ptr``, ``element_size``, ``nbytes``,
``is_signed``, ``type``, ``new``, ``resize_``, ``share_memory_``, ``pin_memory`` and their kin.

A tensor's memory is its array: a numpy array on the CPU (a view of another array when the tensor
is a view), a :class:`~zgrad.kernels.cuda.array.DeviceArray` on CUDA. Strides and offsets are
counted in elements, as PyTorch counts them.
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np

from zgrad.creation import empty, size_arg, tensor
from zgrad.engine.versions import bump
from zgrad.errors import AutogradError
from zgrad.kernels import dispatch
from zgrad.kernels.promotion import BFLOAT16
from zgrad.kernels.shared_host_memory import allocate_shared
from zgrad.kernels.view_geometry import memory_owner
from zgrad.memory_formats import strided
from zgrad.tensor import Tensor, tensor_methods

__all__ = ["TensorInfo", "type_name"]

_TYPE_NAMES = {
    np.dtype(np.bool_): "BoolTensor", np.dtype(np.uint8): "ByteTensor", np.dtype(np.int8): "CharTensor",
    np.dtype(np.int16): "ShortTensor", np.dtype(np.int32): "IntTensor", np.dtype(np.int64): "LongTensor",
    np.dtype(np.float16): "HalfTensor", BFLOAT16: "BFloat16Tensor", np.dtype(np.float32): "FloatTensor",
    np.dtype(np.float64): "DoubleTensor",
}
_DTYPES_BY_TYPE_NAME = {name: dtype for dtype, name in _TYPE_NAMES.items()}


def type_name(dtype: np.dtype, device_type: str) -> str:
    """PyTorch's legacy type name of a tensor of ``dtype`` on ``device_type``: ``"zgrad.FloatTensor"``,
    ``"zgrad.cuda.LongTensor"``."""
    return f"zgrad.{'cuda.' if device_type == 'cuda' else ''}{_TYPE_NAMES[np.dtype(dtype)]}"


def _parse_type(dtype: Any) -> tuple[np.dtype, str | None]:
    """(dtype, device type or None) of a ``type(...)`` argument: a dtype, a legacy type name
    ("zgrad.DoubleTensor", "zgrad.cuda.FloatTensor") or a legacy typed constructor
    (``zgrad.DoubleTensor``).

    Raises:
        ValueError: a string that is no legacy type name (PyTorch's message).
        TypeError: neither a dtype, a string nor a typed constructor (PyTorch's message).
    """
    if callable(dtype) and getattr(dtype, "__name__", "") in _DTYPES_BY_TYPE_NAME:
        return _DTYPES_BY_TYPE_NAME[dtype.__name__], None
    if isinstance(dtype, str):
        module, _, name = dtype.rpartition(".")
        if module in ("zgrad", "zgrad.cuda") and name in _DTYPES_BY_TYPE_NAME:
            return _DTYPES_BY_TYPE_NAME[name], "cuda" if module.endswith("cuda") else "cpu"
        raise ValueError(f"invalid type: '{dtype}'")
    try:
        return np.dtype(dtype), None
    except TypeError:
        raise TypeError("dtype must be a type, str, or dtype object") from None


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _in_shared_memory(array: np.ndarray) -> bool:
    """Whether host ``array`` lies in a shared mapping made by :meth:`TensorInfo.share_memory_`."""
    owner = memory_owner(array).base
    return isinstance(owner, mmap.mmap) or isinstance(owner, memoryview) and isinstance(owner.obj, mmap.mmap)


def _resized_copy(array: np.ndarray, shape: tuple[int, ...], buffer: Any = None) -> np.ndarray:
    """A new C-contiguous array of ``shape`` (over ``buffer`` when given) starting with ``array``'s
    elements in order; the rest uninitialized."""
    count = int(np.prod(shape, dtype=np.int64))
    flat = np.empty(count, array.dtype) if buffer is None else np.frombuffer(buffer, array.dtype, count)
    kept = min(count, array.size)
    flat[:kept] = array.reshape(-1)[:kept]
    return flat.reshape(shape)


@tensor_methods
class TensorInfo:
    """Memory and type queries of :class:`zgrad.Tensor` (bound onto it; never instantiated)."""

    # --- layout ---------------------------------------------------------------------------------

    def stride(self, dim: int | None = None) -> Any:
        """The step in elements between neighbours along each dimension (a tuple), or along
        ``dim``; a C-contiguous tensor's are the products of the sizes after each dimension, an
        expanded dimension's is 0.

        Raises:
            IndexError: ``dim`` is out of range.
        """
        itemsize = self._data.itemsize
        strides = tuple(s // itemsize for s in self._data.strides)
        if dim is None:
            return strides
        n = max(self.ndim, 1)
        if not -n <= dim < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
        return strides[dim] if self.ndim else 1

    def storage_offset(self) -> int:
        """Where this tensor starts in the memory it shares with the tensor it is a view of, in
        elements (0 for a tensor that owns its memory)."""
        array = self._data
        if not isinstance(array, np.ndarray):
            return array.storage_offset()
        return (_address(array) - _address(memory_owner(array))) // array.itemsize

    def data_ptr(self) -> int:
        """The address of the first element (on CUDA a device address; 0 for no elements)."""
        array = self._data
        if not array.size:
            return 0
        return _address(array) if isinstance(array, np.ndarray) else array.data_ptr()

    def element_size(self) -> int:
        """Bytes per element."""
        return self._data.itemsize

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self._data.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the elements: ``numel() * element_size()``."""
        return int(self._data.size) * self._data.itemsize

    def nelement(self) -> int:
        """The number of elements (``numel()``)."""
        return int(self._data.size)

    def ndimension(self) -> int:
        """The number of dimensions (``dim()``)."""
        return self._data.ndim

    def is_same_size(self, other: Tensor) -> bool:
        """Whether ``other`` has this tensor's shape."""
        return self.shape == other.shape

    # --- type -----------------------------------------------------------------------------------

    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    def is_signed(self) -> bool:
        """Whether the dtype holds negative values (floats and signed integers; not uint8 or bool)."""
        return self.dtype.kind in "if" or self.dtype == BFLOAT16

    def is_complex(self) -> bool:
        """False: zgrad has no complex dtypes."""
        return False

    @property
    def layout(self) -> Any:
        """``zgrad.strided`` (a sparse COO tensor's is ``zgrad.sparse_coo``)."""
        return strided

    @property
    def is_sparse(self) -> bool:
        """False for a dense tensor (True for a sparse COO one); zgrad has no sparse CSR, quantized, meta,
        MKL-DNN or nested tensors."""
        return False

    is_sparse_csr = is_quantized = is_meta = is_mkldnn = is_nested = is_sparse

    # zgrad's dtypes are all real: PyTorch's conjugate and negative views of them are the tensor itself

    def conj(self) -> Any:
        """Self: the conjugate of a real tensor (PyTorch returns the tensor itself too)."""
        return self

    conj_physical = resolve_conj = resolve_neg = conj

    def isreal(self) -> Any:
        """Where the imaginary part is 0, as a bool tensor: everywhere for a real dtype."""
        if self.dtype.kind == "c":
            return Tensor(np.asarray(self._data.imag == 0))
        return Tensor(dispatch.full(self.shape, True, np.dtype(np.bool_), dispatch.device_type_of(self._data)))

    def get_device(self) -> int:
        """The CUDA device index of a CUDA tensor, -1 for a CPU one (PyTorch's)."""
        device = self.device
        return -1 if device.type == "cpu" else device.index or 0

    @property
    def output_nr(self) -> int:
        """Which output of its ``grad_fn`` this tensor is (0 for a leaf)."""
        return self._output_nr if self.grad_fn is not None else 0

    def is_conj(self) -> bool:
        """False: no tensor of a real dtype has its conjugate bit set."""
        return False

    def is_neg(self) -> bool:
        """False: no tensor of a real dtype has its negative bit set."""
        return False

    @property
    def real(self) -> Any:
        """Self: the real part of a real tensor."""
        return self

    @property
    def imag(self) -> Any:
        """Refused, as PyTorch refuses it for real dtypes (the only ones zgrad has).

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")

    def is_inference(self) -> bool:
        """False: zgrad's ``inference_mode`` turns recording off as ``no_grad`` does and makes no
        inference tensors, so every tensor may later take part in autograd."""
        return False

    def is_nonzero(self) -> bool:
        """Whether the single element is not zero.

        Raises:
            RuntimeError: no element, or more than one (PyTorch's messages).
        """
        size = self._data.size
        if size != 1:
            raise RuntimeError(f"Boolean value of Tensor with {'no values' if size == 0 else 'more than one value'} "
                               "is ambiguous")
        return bool(self.item())

    def type(self, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        """Without ``dtype`` the legacy type name (``"zgrad.FloatTensor"``); with one (a dtype, a
        type name or a typed constructor such as ``zgrad.DoubleTensor``) this tensor in that type:
        self if nothing changes, else a differentiable copy.

        Raises:
            ValueError: a type name zgrad does not know.
        """
        if dtype is None:
            return type_name(self.dtype, self.device.type)
        dtype, device_type = _parse_type(dtype)
        return self.to(device=device_type, dtype=dtype, non_blocking=non_blocking)

    # --- new memory -----------------------------------------------------------------------------

    def new(self, *args: Any, device: Any = None) -> Tensor:
        """PyTorch's legacy constructor in this tensor's dtype and on its device (or ``device``):
        ``new()`` an empty tensor, ``new(*sizes)`` an uninitialized one of that size, ``new(data)``
        one holding a copy of ``data`` (a sequence, array or tensor).

        Raises:
            TypeError: several arguments that are not all sizes.
        """
        device = self.device if device is None else device
        if not args:
            return empty(0, dtype=self.dtype, device=device)
        if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
            return empty(*args, dtype=self.dtype, device=device)
        if len(args) == 1:
            return tensor(args[0], dtype=self.dtype, device=device)
        raise TypeError(f"new() expects sizes (ints) or one sequence of data, got {args!r}")

    def resize_(self, *sizes: Any, memory_format: Any = None) -> Tensor:
        """Give this tensor the shape ``sizes`` in place, as PyTorch does: the same shape changes
        nothing; otherwise the memory it views (from its storage offset on) is read as a
        C-contiguous array of the new shape, shared as long as it is large enough, else copied
        into new memory whose extra elements are uninitialized (views of the old memory then no
        longer share this tensor's).

        Raises:
            AutogradError: the tensor requires grad (PyTorch's message).
        """
        shape = size_arg(sizes)
        if self._requires_grad:
            raise AutogradError("cannot resize variables that require grad")
        if shape == self.shape:
            return self
        count = int(np.prod(shape, dtype=np.int64))
        array = self._data
        if isinstance(array, np.ndarray):
            root = memory_owner(array)
            if root.dtype == array.dtype and root.flags.c_contiguous:
                storage = root.reshape(-1)[self.storage_offset():]  # the elements PyTorch's storage holds from here
            else:
                storage = array.reshape(-1)
            self._rebind(storage[:count].reshape(shape) if count <= storage.size else _resized_copy(storage, shape))
        else:
            resized = dispatch.empty(shape, self.dtype, "cuda")
            kept = min(count, array.size)
            dispatch.copy_into(resized.reshape(-1)[:kept], dispatch.contiguous(array).reshape(-1)[:kept])
            self._rebind(resized)
        bump(self._data)
        return self

    def resize_as_(self, the_template: Tensor, memory_format: Any = None) -> Tensor:
        """``resize_(the_template.shape)``."""
        return self.resize_(the_template.shape)

    # --- shared and pinned memory ---------------------------------------------------------------

    def share_memory_(self) -> Tensor:
        """Move a CPU tensor's elements into shared memory and return self: processes forked after
        this call, and processes it is sent to through ``zgrad.multiprocessing`` (a spawned
        child's arguments, a queue), see each other's writes. A no-op for a tensor already there
        and on CUDA. Views of the old memory no longer share it."""
        if self.is_cpu and not _in_shared_memory(self._data):
            self._rebind(_resized_copy(self._data, self.shape, allocate_shared(self._data.nbytes)))
        return self

    def is_shared(self) -> bool:
        """Whether the elements are in shared memory: after :meth:`share_memory_` on the CPU, always
        on CUDA (as PyTorch reports)."""
        return not self.is_cpu or _in_shared_memory(self._data)

    def pin_memory(self, device: Any = None) -> Tensor:
        """A copy of this CPU tensor in page-locked host memory (faster to copy to the GPU; what
        the DataLoader's ``pin_memory=True`` does to a batch), with this tensor's
        ``requires_grad``.

        Raises:
            RuntimeError: a CUDA tensor (PyTorch's message). ZgradError: no CUDA backend here.
        """
        if not self.is_cpu:
            raise RuntimeError(f"cannot pin '{type_name(self.dtype, 'cuda')}' only dense CPU tensors can be pinned")
        return Tensor(dispatch.pin_memory(self._data), requires_grad=self.requires_grad)

    def is_pinned(self, device: Any = None) -> bool:
        """Whether this CPU tensor's elements are in page-locked memory from :meth:`pin_memory`."""
        return dispatch.is_pinned(self._data)
