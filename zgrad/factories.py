"""The public tensor factories (``zgrad.zeros``, ``zgrad.arange``, ``zgrad.rand``, ...): those of
:mod:`zgrad.creation` and :mod:`zgrad.creation_random` with the keyword arguments PyTorch's take
besides the values' own: ``out=``, ``layout=``, and where PyTorch has them ``pin_memory=`` and
``memory_format=``. zgrad's own code calls the plain factories.

``out=`` follows PyTorch: the result takes out's dtype and device unless ``dtype``/``device`` are
given, out is resized to the result's shape (with PyTorch's deprecation warning when it held
elements) and returned (requiring grad with ``requires_grad=True``). ``layout`` must be
``zgrad.strided``. ``pin_memory=True`` returns the result in page-locked memory
(:meth:`Tensor.pin_memory`; it needs CUDA, as PyTorch's). A ``memory_format`` is accepted and the
tensor stays C-contiguous, as for ``Module.to``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from zgrad import creation, creation_random
from zgrad.memory_formats import check_strided
from zgrad.ops.out_argument import write_out
from zgrad.tensor import Tensor

__all__ = ["arange", "empty", "eye", "full", "linspace", "logspace", "ones", "rand", "randint", "randn", "randperm",
           "scalar_tensor", "tensor", "zeros"]


def _with_keywords(make: Callable[..., Tensor], out: bool = True, pin_memory: bool = True,
                   memory_format: bool = False) -> Callable[..., Tensor]:
    """``make`` taking PyTorch's ``layout=`` and, as flagged, ``out=``, ``pin_memory=`` and ``memory_format=``."""
    name = make.__name__

    @functools.wraps(make)
    def factory(*args: Any, layout: Any = None, **kwargs: Any) -> Tensor:
        check_strided(layout, name)
        target = kwargs.pop("out", None) if out else None
        pinned = kwargs.pop("pin_memory", False) if pin_memory else False
        if memory_format:
            kwargs.pop("memory_format", None)
        if target is None:
            result = make(*args, **kwargs)
            return result.pin_memory() if pinned else result
        requires_grad = kwargs.pop("requires_grad", False)
        if isinstance(target, Tensor):
            kwargs["dtype"] = kwargs.get("dtype") or target.dtype
            kwargs["device"] = kwargs.get("device") or target.device
        written = write_out(name, make(*args, **kwargs), target)
        return written.requires_grad_() if requires_grad else written  # out becomes a leaf that requires grad

    return factory


arange = _with_keywords(creation.arange, pin_memory=False)
empty = _with_keywords(creation.empty, memory_format=True)
eye = _with_keywords(creation.eye, pin_memory=False)
full = _with_keywords(creation.full)
linspace = _with_keywords(creation.linspace, pin_memory=False)
logspace = _with_keywords(creation.logspace, pin_memory=False)
ones = _with_keywords(creation.ones)
zeros = _with_keywords(creation.zeros)
scalar_tensor = _with_keywords(creation.scalar_tensor, out=False)
tensor = _with_keywords(creation.tensor, out=False)
rand = _with_keywords(creation_random.rand)
randn = _with_keywords(creation_random.randn)
randint = _with_keywords(creation_random.randint, pin_memory=False)
randperm = _with_keywords(creation_random.randperm)
