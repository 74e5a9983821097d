"""The public tensor factories (``zgrad.zeros``, ``zgrad.arange``, ``zgrad.rand``, ...): those of
:mod:`zgrad.creation` and :mod:`zgrad.creation_random` with the keyword arguments PyTorch's take
besides the values' own: ``out=``, ``layout=``, and where PyTorch has them ``pin_memory=`` and
``memory_format=``. zgrad's own code calls the plain factories.

``out=`` follows PyTorch: the result takes out's dtype and device (a ``dtype`` or ``device``
given must be out's), out is resized to the result's shape (with PyTorch's deprecation warning when it held
elements) and returned (requiring grad with ``requires_grad=True``). ``layout`` must be
``zgrad.strided``. ``pin_memory=True`` returns the result in page-locked memory
(:meth:`Tensor.pin_memory`; it needs CUDA, as PyTorch's). A ``memory_format`` is accepted and the
tensor stays C-contiguous, as for ``Module.to``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from zgrad import creation, creation_random
from zgrad.device import as_device
from zgrad.engine.grad_mode import is_grad_enabled
from zgrad.errors import AutogradError, DTypeError, ZgradError
from zgrad.kernels.dispatch import scalar_type_name
from zgrad.memory_formats import check_strided
from zgrad.ops.out_argument import write_out
from zgrad.tensor import Tensor

__all__ = ["arange", "empty", "eye", "full", "linspace", "logspace", "ones", "rand", "randint", "randn", "randperm",
           "range", "scalar_tensor", "tensor", "zeros"]


def _with_keywords(make: Callable[..., Tensor], out: bool = True, memory_format: bool = False) -> Callable[..., Tensor]:
    """``make`` taking PyTorch's ``layout=`` and ``pin_memory=`` and, as flagged, ``out=`` and
    ``memory_format=``; its docstring says so."""
    name = make.__name__

    @functools.wraps(make)
    def factory(*args: Any, layout: Any = None, **kwargs: Any) -> Tensor:
        check_strided(layout, name)
        target = kwargs.pop("out", None) if out else None
        pinned = kwargs.pop("pin_memory", False)
        if memory_format:
            kwargs.pop("memory_format", None)
        if target is None:
            result = make(*args, **kwargs)
            return result.pin_memory() if pinned else result
        requires_grad = kwargs.pop("requires_grad", False)
        if isinstance(target, Tensor):
            _check_out(name, target, kwargs)
            kwargs["dtype"], kwargs["device"] = target.dtype, target.device
        written = write_out(name, make(*args, **kwargs), target)
        return written.requires_grad_() if requires_grad else written  # out becomes a leaf that requires grad

    keywords = ("``out=``, " if out else "") + "``layout=`` (``zgrad.strided``), ``pin_memory=``" + \
        (", ``memory_format=``" if memory_format else "")
    factory.__doc__ = f"{(make.__doc__ or '').rstrip()}\n\n    Also PyTorch's {keywords}: see :mod:`zgrad.factories`."
    return factory


def _check_out(name: str, out: Tensor, kwargs: dict[str, Any]) -> None:
    """PyTorch's checks of a factory's ``out``: no gradient recording, and the ``dtype`` and
    ``device`` given, if any, are out's.

    Raises:
        AutogradError: grad mode is on and out requires grad (PyTorch's message).
        DTypeError: ``dtype`` is not out's (PyTorch's message).
        ZgradError: ``device`` is not out's.
    """
    if is_grad_enabled() and out.requires_grad:
        raise AutogradError(f"aten::{name}(): functions with out=... arguments don't support automatic "
                            "differentiation, but one of the arguments requires grad.")
    dtype, device = kwargs.get("dtype"), kwargs.get("device")
    if dtype is not None and np.dtype(dtype) != out.dtype:
        raise DTypeError(f"dtype {scalar_type_name(np.dtype(dtype))} does not match dtype of out parameter "
                         f"({scalar_type_name(out.dtype)})")
    if device is not None and as_device(device) != out.device:
        raise ZgradError(f"{name}(): device {as_device(device)} does not match the device of out ({out.device})")


arange = _with_keywords(creation.arange)
empty = _with_keywords(creation.empty, memory_format=True)
eye = _with_keywords(creation.eye)
full = _with_keywords(creation.full)
linspace = _with_keywords(creation.linspace)
logspace = _with_keywords(creation.logspace)
ones = _with_keywords(creation.ones)
zeros = _with_keywords(creation.zeros)
scalar_tensor = _with_keywords(creation.scalar_tensor, out=False)
tensor = _with_keywords(creation.tensor, out=False)
rand = _with_keywords(creation_random.rand)
randn = _with_keywords(creation_random.randn)
randint = _with_keywords(creation_random.randint)
randperm = _with_keywords(creation_random.randperm)
range = _with_keywords(creation.legacy_range)  # noqa: A001 - PyTorch's deprecated torch.range
