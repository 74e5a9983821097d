"""Lazy modules: :class:`LazyModuleMixin`, and ``LazyLinear``, ``LazyBatchNorm1d/2d/3d`` and
``LazyInstanceNorm1d/2d/3d``, as PyTorch's (the lazy convolutions are in :mod:`zgrad.nn.lazy_conv`).

A lazy module is made without its input size: its parameters and buffers start uninitialized
(:mod:`zgrad.nn.parameter`), and a forward pre-hook, run before any other, infers the size from the
first input, materializes them (the same objects, so an optimizer made before holds them) and
draws them as the ordinary class does (the same calls on zgrad's generator, so the values equal
those of the ordinary module made with the same seed at that point); then the module becomes its
``cls_to_become`` (``type(m) is Linear``) and the hook is gone. ``load_state_dict`` of real values
materializes the parameters it has values for, with their shapes.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from zgrad.nn.layers import Linear
from zgrad.nn.module import Module
from zgrad.nn.norm import BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from zgrad.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy
from zgrad.tensor import Tensor

__all__ = ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
           "LazyInstanceNorm3d", "LazyLinear", "LazyModuleMixin"]


class LazyModuleMixin:
    """A mixin for modules whose parameters' shapes come from their first input, as PyTorch's
    ``torch.nn.modules.lazy.LazyModuleMixin``: put it first among the bases (``class
    MyLazy(LazyModuleMixin, Module)``), hold :class:`~zgrad.nn.parameter.UninitializedParameter`
    s, and implement :meth:`initialize_parameters`. Before the first forward it runs
    ``initialize_parameters(*args, **kwargs)``; then, if nothing is left uninitialized, the module
    becomes ``cls_to_become`` (when not None) and stops checking.

    Raises (at the first forward):
        RuntimeError: parameters or buffers still uninitialized after ``initialize_parameters``.
    """

    cls_to_become: type | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._register_lazy_hook()

    def _register_lazy_hook(self) -> None:
        """Register the pre-hook that initializes the module (before any hook registered later)."""
        handle = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)
        object.__setattr__(self, "_lazy_hook_id", handle.id)  # an id survives copy.deepcopy; a handle would not

    def has_uninitialized_params(self) -> bool:
        """Whether any of this module's own parameters or buffers is still uninitialized."""
        return any(is_lazy(t) for t in (*self._parameters.values(), *self._buffers.values()))

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        """Infer the shapes from the forward's arguments and materialize the parameters.

        Raises:
            NotImplementedError: always, here; lazy modules override it.
        """
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")

    def _infer_parameters(self, module: Module, args: tuple, kwargs: dict | None = None) -> None:
        self.initialize_parameters(*args, **(kwargs or {}))
        if self.has_uninitialized_params():
            raise RuntimeError(f"module {type(self).__name__} has not been fully initialized")
        hook_id = self.__dict__.pop("_lazy_hook_id", None)
        self._forward_pre_hooks.pop(hook_id, None)
        self._forward_pre_hooks_with_kwargs.pop(hook_id, None)
        if self.cls_to_become is not None:
            self.__class__ = self.cls_to_become

    def _lazy_load_hook(self, state_dict: Mapping[str, Any], prefix: str) -> None:
        """Materialize each uninitialized parameter or buffer that ``state_dict`` holds a real value
        for (``Module.load_state_dict`` calls this before copying), with that value's shape."""
        for table in (self._parameters, self._buffers):
            for name, tensor in table.items():
                value = state_dict.get(prefix + name)
                if is_lazy(tensor) and isinstance(value, (Tensor, np.ndarray)) and not is_lazy(value):
                    tensor.materialize(tuple(value.shape))


class LazyLinear(LazyModuleMixin, Linear):
    """A :class:`~zgrad.nn.Linear` whose ``in_features`` is the last size of its first input, as
    ``torch.nn.LazyLinear``: ``weight`` (out_features, in_features) and ``bias`` start
    uninitialized (``in_features`` 0), and after the first forward it is a ``Linear``.

    Raises (at the first forward):
        AssertionError: weights loaded (``load_state_dict``) for another ``in_features``
            (PyTorch's message).
        IndexError: a 0-d input.
    """

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        Module.__init__(self)
        self.in_features, self.out_features = 0, out_features
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self._register_lazy_hook()

    def reset_parameters(self) -> None:
        """Linear's initialization, once the parameters exist."""
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Any) -> None:  # noqa: A002 - torch's name
        """``in_features`` from ``input``'s last size; the weight and bias drawn as Linear's."""
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()
        elif self.in_features == 0:  # loaded with load_state_dict
            if input.shape[-1] != self.weight.shape[1]:
                raise AssertionError(f"The in_features inferred from input: {input.shape[-1]} is not equal to "
                                     f"in_features from self.weight: {self.weight.shape[1]}")
            self.in_features = input.shape[-1]


class _LazyNorm(LazyModuleMixin):
    """What the lazy batch and instance norms share: ``num_features`` (0 until then) from the
    channel dimension of the first input; ``weight``/``bias`` (with ``affine``) and
    ``running_mean``/``running_var`` (with ``track_running_stats``) uninitialized until then;
    ``num_batches_tracked`` is a real buffer from the start, as PyTorch's."""

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__(0, eps, momentum, affine, track_running_stats, device, dtype)
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
            else:
                del self.bias
                self.bias = None
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        """The norm's reset (statistics 0 and 1, weight 1, bias 0), once everything exists."""
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def _channels(self, input: Any) -> int:  # noqa: A002
        return input.shape[1]

    def initialize_parameters(self, input: Any) -> None:  # noqa: A002 - torch's name
        """``num_features`` from ``input``'s channel dimension; then the norm's reset."""
        if self.has_uninitialized_params():
            self.num_features = self._channels(input)
            for tensor in (self.weight, self.bias, self.running_mean, self.running_var):
                if is_lazy(tensor):
                    tensor.materialize((self.num_features,))
            self.reset_parameters()
        elif self.num_features == 0:  # loaded with load_state_dict
            self.num_features = self._channels(input)


class _LazyInstanceNorm(_LazyNorm):
    def _channels(self, input: Any) -> int:  # noqa: A002
        """The channel dimension of a batched or unbatched input (PyTorch reads dimension 1, which
        is not the channels of an unbatched input)."""
        return input.shape[-self.unbatched_dims]


class LazyBatchNorm1d(_LazyNorm, BatchNorm1d):
    """A :class:`~zgrad.nn.BatchNorm1d` whose ``num_features`` is its first input's size in
    dimension 1, as ``torch.nn.LazyBatchNorm1d``; after the first forward it is a ``BatchNorm1d``."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNorm, BatchNorm2d):
    """A :class:`~zgrad.nn.BatchNorm2d` whose ``num_features`` is its first input's size in
    dimension 1, as ``torch.nn.LazyBatchNorm2d``; after the first forward it is a ``BatchNorm2d``."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNorm, BatchNorm3d):
    """A :class:`~zgrad.nn.BatchNorm3d` whose ``num_features`` is its first input's size in
    dimension 1, as ``torch.nn.LazyBatchNorm3d``; after the first forward it is a ``BatchNorm3d``."""

    cls_to_become = BatchNorm3d


class LazyInstanceNorm1d(_LazyInstanceNorm, InstanceNorm1d):
    """A :class:`~zgrad.nn.InstanceNorm1d` whose ``num_features`` is its first input's channel
    count, as ``torch.nn.LazyInstanceNorm1d`` (whose defaults are ``affine=True``,
    ``track_running_stats=True``); after the first forward it is an ``InstanceNorm1d``."""

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm, InstanceNorm2d):
    """A :class:`~zgrad.nn.InstanceNorm2d` whose ``num_features`` is its first input's channel
    count, as ``torch.nn.LazyInstanceNorm2d`` (``affine=True``, ``track_running_stats=True`` by
    default); after the first forward it is an ``InstanceNorm2d``."""

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm, InstanceNorm3d):
    """A :class:`~zgrad.nn.InstanceNorm3d` whose ``num_features`` is its first input's channel
    count, as ``torch.nn.LazyInstanceNorm3d`` (``affine=True``, ``track_running_stats=True`` by
    default); after the first forward it is an ``InstanceNorm3d``."""

    cls_to_become = InstanceNorm3d

