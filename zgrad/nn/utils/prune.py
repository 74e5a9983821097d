"""``zgrad.nn.utils.prune``: magnitude, random and custom pruning of module parameters, as
``torch.nn.utils.prune``.

Pruning the parameter ``name`` of a module moves the parameter to ``<name>_orig``, stores a 0/1
buffer ``<name>_mask`` and registers a forward pre-hook (the pruning method itself) that sets the
plain attribute ``module.<name> = <name>_orig * <name>_mask`` before each forward. Pruning the same
parameter again combines the masks in a :class:`PruningContainer`: an unstructured method prunes
among the entries still unpruned, a structured one among the channels (along its ``dim``) that
still hold an unpruned entry. :func:`remove` makes the pruning permanent.

``amount`` is a count when it is an int and a fraction of the candidates when it is a float in
``[0, 1]`` (rounded with Python's ``round``).
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, TypeVar

import numpy as np

from zgrad.creation import ones, ones_like
from zgrad.creation_random import rand, rand_like
from zgrad.engine.grad_mode import no_grad
from zgrad.nn.module import Module
from zgrad.ops.functions import cat
from zgrad.ops.selection import nonzero
from zgrad.ops.sorting import topk
from zgrad.ops.vector_norm import vector_norm
from zgrad.tensor import Tensor

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]

T_module = TypeVar("T_module", bound=Module)


# --- helpers --------------------------------------------------------------------------------------

def _check_amount(amount: Any) -> None:
    """Raise PyTorch's errors for an ``amount`` that is neither a count nor a fraction."""
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    is_count = isinstance(amount, numbers.Integral)
    if (is_count and amount < 0) or (not is_count and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _how_many(amount: int | float, candidates: int) -> int:
    """The number of entries (or channels) to prune among ``candidates``."""
    count = int(amount) if isinstance(amount, numbers.Integral) else round(float(amount) * candidates)
    if count > candidates:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={candidates}")
    return count


def _check_structured(t: Tensor, dim: int) -> int:
    """``dim`` made non-negative, after PyTorch's checks that ``t`` has channels along it."""
    if t.dim() < 2:
        raise ValueError("Structured pruning can only be applied to multidimensional tensors. "
                         f"Found tensor of shape {t.shape} with {t.dim()} dims")
    if not -t.dim() <= dim < t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")
    return dim % t.dim()


def _channel_mask(default_mask: Tensor, dim: int, drop: Tensor) -> Tensor:
    """``default_mask`` with the channels ``drop`` (indices along ``dim``) zeroed."""
    keep = ones(default_mask.shape[dim], dtype=default_mask.dtype, device=default_mask.device)
    if drop.numel() > 0:
        keep[drop] = 0
    shape = [1] * default_mask.dim()
    shape[dim] = default_mask.shape[dim]
    return default_mask * keep.view(shape)


def _hook_for(module: Module, name: str) -> tuple[Any, "BasePruningMethod"] | None:
    """The (key, method) of the pruning hook of ``module.<name>``, or None."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and getattr(hook, "_tensor_name", None) == name:
            return key, hook
    return None


# --- methods --------------------------------------------------------------------------------------

class BasePruningMethod(ABC):
    """Base class of pruning methods: a method computes a 0/1 mask for a tensor and, once applied
    to a module, is the forward pre-hook that recomputes the pruned parameter.

    Subclasses set ``PRUNING_TYPE`` (``"unstructured"``, ``"structured"`` or ``"global"``) and
    implement :meth:`compute_mask`.
    """

    PRUNING_TYPE: str | None = None
    _tensor_name: str

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask for ``t``: ``default_mask`` (the mask so far) with this method's pruning added."""

    def apply_mask(self, module: Module) -> Tensor:
        """``<name>_orig * <name>_mask`` of ``module``: the pruned parameter."""
        orig = getattr(module, self._tensor_name + "_orig")
        return orig * getattr(module, self._tensor_name + "_mask").to(dtype=orig.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, *args: Any, importance_scores: Tensor | None = None,
              **kwargs: Any) -> "BasePruningMethod":
        """Prune ``module.<name>`` with ``cls(*args, **kwargs)``; combine with an earlier pruning of it.

        Args:
            module: the module holding the parameter.
            name: the parameter's name.
            importance_scores: scores ranking the entries (default: the parameter, as pruned so far).

        Returns:
            The hook registered on ``module``: the new method, or a :class:`PruningContainer`.
        """
        method = cls(*args, **kwargs)
        method._tensor_name = name
        found = _hook_for(module, name)
        current = getattr(module, name)
        if importance_scores is None:
            importance_scores = current
        elif tuple(importance_scores.shape) != tuple(current.shape):
            raise AssertionError(f"importance_scores should have the same shape as parameter {name} of {module}, "
                                 f"got {importance_scores.shape} vs {current.shape}")
        if found is None:
            hook = method
            default_mask = ones_like(current)
        else:
            key, previous = found
            earlier = tuple(previous) if isinstance(previous, PruningContainer) else (previous,)
            hook = PruningContainer(*earlier, method)
            default_mask = getattr(module, name + "_mask").detach().clone()
        with no_grad():
            mask = hook.compute_mask(importance_scores.detach(), default_mask=default_mask)
        if found is None:
            module.register_parameter(name + "_orig", module._parameters[name])
            del module._parameters[name]
            module.register_buffer(name + "_mask", mask)
        else:
            del module._forward_pre_hooks[key]
            setattr(module, name + "_mask", mask)
        setattr(module, name, hook.apply_mask(module))
        module.register_forward_pre_hook(hook)
        return hook

    def prune(self, t: Tensor, default_mask: Tensor | None = None,
              importance_scores: Tensor | None = None) -> Tensor:
        """``t`` times the mask this method computes from ``importance_scores`` (default ``t``)."""
        scores = t if importance_scores is None else importance_scores
        if tuple(scores.shape) != tuple(t.shape):
            raise ValueError("importance_scores should have the same shape as tensor t")
        mask = self.compute_mask(scores, ones_like(t) if default_mask is None else default_mask)
        return t * mask.to(dtype=t.dtype)

    def remove(self, module: Module) -> None:
        """Make the pruning of ``module.<name>`` permanent: ``<name>`` is the parameter again, holding
        the pruned values, and ``<name>_orig`` and ``<name>_mask`` are gone (the hook is not removed
        here; :func:`remove` does that)."""
        name = self._tensor_name
        with no_grad():
            pruned = self.apply_mask(module)
        if name in module.__dict__:
            object.__delattr__(module, name)
        param = module._parameters[name + "_orig"]
        param.data = pruned.detach()
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        setattr(module, name, param)


class PruningContainer(BasePruningMethod):
    """The successive pruning methods of one parameter, as one hook. Its mask adds the latest
    method's pruning to the mask so far; see the module docstring for which entries it prunes among."""

    def __init__(self, *methods: BasePruningMethod) -> None:
        self._pruning_methods: tuple[BasePruningMethod, ...] = ()
        if len(methods) == 1 and not isinstance(methods[0], BasePruningMethod) and isinstance(methods[0], Iterable):
            methods = tuple(methods[0])
        if methods:
            self._tensor_name = methods[0]._tensor_name
        for method in methods:
            self.add_pruning_method(method)

    def add_pruning_method(self, method: BasePruningMethod) -> None:
        """Append ``method``, which must prune the same parameter."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError("Can only add pruning methods acting on the parameter named "
                             f"'{self._tensor_name}' to PruningContainer {self}. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self) -> Any:
        return iter(self._pruning_methods)

    def __getitem__(self, index: int) -> BasePruningMethod:
        return self._pruning_methods[index]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``default_mask`` with the pruning of the latest method, computed among what is unpruned."""
        method = self._pruning_methods[-1]
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            alive = default_mask == 1
            mask = default_mask.clone()
            mask[alive] = method.compute_mask(t[alive], default_mask[alive]).to(dtype=mask.dtype)
            return mask
        if kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError("Pruning methods of PRUNING_TYPE 'structured' need to have the attribute `dim` "
                                     "defined.")
            dim = _check_structured(t, method.dim)
            others = [d for d in range(t.dim()) if d != dim]
            alive = nonzero(default_mask.sum(dim=others) != 0).view(-1)
            partial = method.compute_mask(t.index_select(dim, alive), default_mask.index_select(dim, alive))
            return default_mask.index_copy(dim, alive, partial.to(dtype=default_mask.dtype))
        if kind == "global":
            return method.compute_mask(t, default_mask)
        raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones (to give a module the pruning attributes)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``default_mask`` itself."""
        return default_mask

    @classmethod
    def apply(cls, module: Module, name: str) -> BasePruningMethod:  # type: ignore[override]
        """Add the pruning attributes to ``module.<name>`` without pruning anything."""
        return super().apply(module, name)


class RandomUnstructured(BasePruningMethod):
    """Prunes ``amount`` entries chosen at random."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: int | float) -> None:
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``default_mask`` with ``amount`` random entries of ``t`` zeroed."""
        count = _how_many(self.amount, t.numel())
        mask = default_mask.clone()
        if count:
            drop = topk(rand_like(t, dtype=np.float32).view(-1), count).indices
            mask.view(-1)[drop] = 0
        return mask

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float) -> BasePruningMethod:  # type: ignore[override]
        """Prune ``amount`` random entries of ``module.<name>``."""
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the ``amount`` entries of smallest absolute value (of the importance scores)."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: int | float) -> None:
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``default_mask`` with the ``amount`` entries of smallest ``|t|`` zeroed."""
        count = _how_many(self.amount, t.numel())
        mask = default_mask.clone()
        if count:
            drop = topk(t.abs().reshape(-1), count, largest=False).indices
            mask.view(-1)[drop] = 0
        return mask

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float,  # type: ignore[override]
              importance_scores: Tensor | None = None) -> BasePruningMethod:
        """Prune the ``amount`` entries of ``module.<name>`` of smallest magnitude."""
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prunes ``amount`` whole channels along ``dim``, chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: int | float, dim: int = -1) -> None:
        _check_amount(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``default_mask`` with ``amount`` random channels along ``dim`` zeroed."""
        dim = _check_structured(t, self.dim)
        count = _how_many(self.amount, t.shape[dim])
        drop = topk(rand(t.shape[dim], device=t.device), count).indices
        return _channel_mask(default_mask, dim, drop)

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float,  # type: ignore[override]
              dim: int = -1) -> BasePruningMethod:
        """Prune ``amount`` random channels of ``module.<name>`` along ``dim``."""
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes the ``amount`` channels along ``dim`` of smallest ``Ln`` norm (over the other dims)."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: int | float, n: int | float | str, dim: int = -1) -> None:
        _check_amount(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``default_mask`` with the ``amount`` channels of ``t`` of smallest norm zeroed."""
        dim = _check_structured(t, self.dim)
        count = _how_many(self.amount, t.shape[dim])
        order = 2 if self.n == "fro" else self.n
        others = tuple(d for d in range(t.dim()) if d != dim)
        norms = vector_norm(t, ord=order, dim=others)
        drop = topk(norms, count, largest=False).indices
        return _channel_mask(default_mask, dim, drop)

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float, n: int | float | str,  # type: ignore[override]
              dim: int, importance_scores: Tensor | None = None) -> BasePruningMethod:
        """Prune the ``amount`` channels of ``module.<name>`` along ``dim`` of smallest ``Ln`` norm."""
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes the entries where a given ``mask`` is zero."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``default_mask * mask``."""
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise AssertionError(f"default_mask shape {default_mask.shape} must match self.mask shape "
                                 f"{self.mask.shape}")
        return default_mask * self.mask.to(dtype=default_mask.dtype, device=default_mask.device)

    @classmethod
    def apply(cls, module: Module, name: str, mask: Tensor) -> BasePruningMethod:  # type: ignore[override]
        """Prune the entries of ``module.<name>`` where ``mask`` is zero."""
        return super().apply(module, name, mask=mask)


# --- functions ------------------------------------------------------------------------------------

def identity(module: T_module, name: str) -> T_module:
    """Give ``module.<name>`` the pruning attributes (an all-ones mask) without pruning it.

    Returns:
        ``module``.
    """
    Identity.apply(module, name)
    return module


def random_unstructured(module: T_module, name: str, amount: int | float) -> T_module:
    """Prune ``amount`` entries of ``module.<name>`` chosen at random (a count, or a fraction in [0, 1]).

    Returns:
        ``module``.

    Raises:
        TypeError, ValueError: ``amount`` is not a non-negative count or a fraction in [0, 1], or
            exceeds the number of entries (PyTorch's messages).
    """
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: T_module, name: str, amount: int | float,
                    importance_scores: Tensor | None = None) -> T_module:
    """Prune the ``amount`` entries of ``module.<name>`` of smallest absolute value (of
    ``importance_scores`` when given).

    Returns:
        ``module``.

    Raises:
        TypeError, ValueError: a bad ``amount``, as :func:`random_unstructured`.
    """
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module: T_module, name: str, amount: int | float, dim: int) -> T_module:
    """Prune ``amount`` random channels of ``module.<name>`` along ``dim``.

    Returns:
        ``module``.

    Raises:
        ValueError: a bad ``amount``, or a parameter with fewer than 2 dims.
        IndexError: ``dim`` is out of range.
    """
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module: T_module, name: str, amount: int | float, n: int | float | str, dim: int,
                  importance_scores: Tensor | None = None) -> T_module:
    """Prune the ``amount`` channels of ``module.<name>`` along ``dim`` of smallest ``Ln`` norm
    (``n`` as ``ord`` of ``vector_norm``: 1, 2, ``inf``, ``-inf``, ``"fro"``...) over the other dims.

    Returns:
        ``module``.

    Raises:
        ValueError: a bad ``amount``, or a parameter with fewer than 2 dims.
        IndexError: ``dim`` is out of range.
    """
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters: Iterable[tuple[Module, str]], pruning_method: type[BasePruningMethod],
                        importance_scores: dict[tuple[Module, str], Tensor] | None = None, **kwargs: Any) -> None:
    """Prune the ``(module, name)`` parameters together: ``pruning_method(**kwargs)`` (an unstructured
    method such as :class:`L1Unstructured`) ranks all their entries at once, so layers lose different
    fractions. ``importance_scores`` maps ``(module, name)`` to scores (default: the parameter).

    Raises:
        TypeError: ``parameters`` is not iterable, ``importance_scores`` is not a dict, or the method
            is not unstructured.
    """
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    if importance_scores is None:
        importance_scores = {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    parameters = list(parameters)
    method = pruning_method(**kwargs)
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError('Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f"{pruning_method} of type {method.PRUNING_TYPE}")
    scores, masks = [], []
    for module, name in parameters:
        param = getattr(module, name)
        scores.append(importance_scores.get((module, name), param).detach().reshape(-1))
        masks.append(getattr(module, name + "_mask", ones_like(param)).detach().reshape(-1))
    method._tensor_name = "temp"
    container = PruningContainer(method)
    with no_grad():
        flat = container.compute_mask(cat(scores), default_mask=cat(masks))
    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        size = param.numel()
        custom_from_mask(module, name, flat[start:start + size].view(param.shape))
        start += size


def custom_from_mask(module: T_module, name: str, mask: Tensor) -> T_module:
    """Prune the entries of ``module.<name>`` where ``mask`` is zero.

    Returns:
        ``module``.
    """
    CustomFromMask.apply(module, name, mask=mask)
    return module


def remove(module: T_module, name: str) -> T_module:
    """Make the pruning of ``module.<name>`` permanent: it is a parameter again, holding the pruned
    values, and ``<name>_orig``, ``<name>_mask`` and the hook are gone.

    Returns:
        ``module``.

    Raises:
        ValueError: ``name`` is not pruned (PyTorch's message).
    """
    found = _hook_for(module, name)
    if found is None:
        raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")
    key, hook = found
    hook.remove(module)
    del module._forward_pre_hooks[key]
    return module


def is_pruned(module: Module) -> bool:
    """Whether ``module`` or one of its submodules has a pruned parameter."""
    return any(isinstance(hook, BasePruningMethod)
               for sub in module.modules() for hook in sub._forward_pre_hooks.values())
