"""``zgrad.nn.utils.init``: :func:`skip_init`, a module built without its parameter
initialization, as ``torch.nn.utils.init``."""

from __future__ import annotations

import inspect
from typing import Any

from zgrad.nn.module import Module
from zgrad.random import fork_rng

__all__ = ["skip_init"]


def skip_init(module_cls: type, *args: Any, **kwargs: Any) -> Module:
    """``module_cls(*args, **kwargs)`` with uninitialized parameters and buffers (as if made with
    ``zgrad.empty``), for when a custom initialization follows.

    PyTorch builds the module on its "meta" device, where no memory is filled, then calls
    ``to_empty``. zgrad has no meta device: the module is built on the CPU with the random streams
    (CPU and CUDA) saved and restored around it, so its initialization draws leave them as PyTorch
    leaves them, and then :meth:`Module.to_empty` gives every parameter and buffer new, unfilled
    memory on ``device`` (default "cpu"). The constructor's initialization therefore still runs
    once on the CPU (its cost is not skipped; its values are dropped). As in PyTorch, the module
    must accept a ``device`` argument and do no computation on its parameters in its constructor
    other than initializing them.

    Example::

        m = zgrad.nn.utils.skip_init(zgrad.nn.Linear, 5, 1)
        zgrad.nn.init.orthogonal_(m.weight)

    Raises:
        RuntimeError: ``module_cls`` is not a Module subclass, or its constructor takes no
            ``device`` argument (PyTorch's messages).
    """
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    final_device = kwargs.pop("device", "cpu")
    kwargs["device"] = "cpu"
    with fork_rng():
        module = module_cls(*args, **kwargs)
    return module.to_empty(device=final_device)
