"""The registry behind :func:`zgrad.distributions.kl.kl_divergence`: closed forms registered per
pair of distribution types, and the lookup of the closest registered pair (p's type decides
first; a tie between two different functions warns)."""

from __future__ import annotations

import warnings
from typing import Any, Callable

from zgrad.distributions.distribution import Distribution
from zgrad.tensor import Tensor

__all__ = ["kl_divergence", "register_kl"]

KLFunction = Callable[[Any, Any], Tensor]
_REGISTRY: dict[tuple[type, type], KLFunction] = {}
_RESOLVED: dict[tuple[type, type], Any] = {}  # lookups already made; cleared by every registration


def register_kl(type_p: type, type_q: type) -> Callable[[KLFunction], KLFunction]:
    """Decorator registering ``fn(p, q)`` as KL(p || q) for p of ``type_p`` and q of ``type_q`` (and
    their subclasses, unless a closer pair is registered)::

        @register_kl(Normal, Normal)
        def kl_normal_normal(p, q): ...

    To settle an ambiguity between (BaseP, DerivedQ) and (DerivedP, BaseQ), register the pair
    (DerivedP, DerivedQ) too.

    Raises:
        TypeError: a type that is not a Distribution subclass.
    """
    for name, kind in (("type_p", type_p), ("type_q", type_q)):
        if not (isinstance(kind, type) and issubclass(kind, Distribution)):
            raise TypeError(f"Expected {name} to be a Distribution subclass but got {kind}")

    def decorator(fn: KLFunction) -> KLFunction:
        _REGISTRY[type_p, type_q] = fn
        _RESOLVED.clear()
        return fn

    return decorator


def _at_least_as_specific(a: tuple[type, type], b: tuple[type, type]) -> bool:
    """Whether pair ``a`` is at least as close as ``b``: its first type a subclass of b's first and,
    when the first types are the same, its second a subclass of b's second."""
    if not issubclass(a[0], b[0]):
        return False
    return a[0] is not b[0] or issubclass(a[1], b[1])


def _most_specific(pairs: list[tuple[type, type]]) -> tuple[type, type]:
    best = pairs[0]
    for pair in pairs[1:]:
        if pair != best and _at_least_as_specific(pair, best):
            best = pair
    return best


def _resolve(type_p: type, type_q: type) -> Any:
    matches = [pair for pair in _REGISTRY if issubclass(type_p, pair[0]) and issubclass(type_q, pair[1])]
    if not matches:
        return NotImplemented
    left = _most_specific(matches)
    right = tuple(reversed(_most_specific([(q, p) for p, q in matches])))
    if _REGISTRY[left] is not _REGISTRY[right]:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please "
                      f"register_kl({left[0].__name__}, {right[1].__name__})", RuntimeWarning, stacklevel=3)
    return _REGISTRY[left]


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q) = E_p[log p(x) - log q(x)], of the distributions' batch shape (inf where p puts mass
    outside q's support).

    Raises:
        NotImplementedError: no closed form is registered for the pair of types (or the registered
            one does not cover these parameters).
    """
    key = (type(p), type(q))
    if key not in _RESOLVED:
        _RESOLVED[key] = _resolve(*key)
    fn = _RESOLVED[key]
    if fn is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                                  f"{type(q).__name__}")
    return fn(p, q)
