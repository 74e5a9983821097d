"""The base of the transforms: :class:`Transform` (inverse, caching, shape inference) and the
inverse it hands out as ``.inv``; re-exported by :mod:`zgrad.distributions.transforms`."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from zgrad.distributions import constraints
from zgrad.memory_formats import Size
from zgrad.tensor import Tensor

__all__ = ["Transform"]


class Transform:
    """An invertible (or pseudo-invertible) map y = t(x) from ``domain`` to ``codomain``.

    A subclass implements ``_call`` and/or ``_inverse``, and ``log_abs_det_jacobian`` when
    ``bijective``. With ``cache_size=1`` the last (x, y) pair is kept, so that ``t.inv(t(x))`` returns
    ``x`` itself (exactly, and with its graph), which helps transforms whose inverse is unstable.

    Args:
        cache_size: 0 (no cache) or 1 (the latest pair).

    Raises:
        ValueError: another cache size.
    """

    bijective = False
    domain: constraints.Constraint
    codomain: constraints.Constraint

    def __init__(self, cache_size: int = 0) -> None:
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._inv: Transform | None = None
        self._cached_x_y: tuple[Any, Any] = (None, None)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_inv"] = None
        return state

    @property
    def event_dim(self) -> int:
        """The event dimensions of domain and codomain, when they agree.

        Raises:
            ValueError: they differ.
        """
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self) -> Transform:
        """The inverse transform (``t.inv.inv is t``)."""
        if self._inv is None:
            self._inv = _InverseTransform(self)
        return self._inv

    @property
    def sign(self) -> int | Tensor:
        """The sign of the Jacobian's determinant (+1 increasing, -1 decreasing) of a bijection."""
        raise NotImplementedError

    def with_cache(self, cache_size: int = 1) -> Transform:
        """This transform with the given cache size.

        Raises:
            NotImplementedError: a subclass with constructor arguments that does not override this.
        """
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x: Tensor) -> Tensor:
        """y = t(x)."""
        return self._through_cache(x, self._call, forward=True)

    def _inv_call(self, y: Tensor) -> Tensor:
        return self._through_cache(y, self._inverse, forward=False)

    def _through_cache(self, value: Tensor, compute: Callable[[Tensor], Tensor], forward: bool) -> Tensor:
        """``compute(value)``, or with a cache the other side of the cached pair when ``value`` is (the
        same object as) its x (``forward``) or its y; a computed pair replaces the cached one."""
        if self._cache_size == 0:
            return compute(value)
        x_old, y_old = self._cached_x_y
        known, other = (x_old, y_old) if forward else (y_old, x_old)
        if value is known:
            return other
        result = compute(value)
        self._cached_x_y = (value, result) if forward else (result, value)
        return result

    def _call(self, x: Tensor) -> Tensor:
        raise NotImplementedError

    def _inverse(self, y: Tensor) -> Tensor:
        raise NotImplementedError

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        """log |dy/dx| at the pair (x, y = t(x))."""
        raise NotImplementedError

    def forward_shape(self, shape: Sequence[int]) -> Size:
        """The shape of t(x) for an x of ``shape``."""
        return Size(shape)

    def inverse_shape(self, shape: Sequence[int]) -> Size:
        """The shape of t.inv(y) for a y of ``shape``."""
        return Size(shape)

    def __repr__(self) -> str:
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    """The inverse of a transform; reached through ``Transform.inv``."""

    def __init__(self, transform: Transform) -> None:
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @constraints.dependent_property(is_discrete=False)
    def domain(self) -> constraints.Constraint:
        return self._inv.codomain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self) -> constraints.Constraint:
        return self._inv.domain

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return self._inv.bijective

    @property
    def sign(self) -> int | Tensor:
        return self._inv.sign

    @property
    def inv(self) -> Transform:
        return self._inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = Transform.__hash__

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._inv!r})"

    def __call__(self, x: Tensor) -> Tensor:
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape: Sequence[int]) -> Size:
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape: Sequence[int]) -> Size:
        return self._inv.forward_shape(shape)
