"""The bases of the distributions placed by a location ``loc``: :class:`_CentredAtLoc` (mean and
mode are ``loc``) and :class:`_LocScale` (a real ``loc`` and a positive ``scale`` broadcast to the
batch shape, as Normal, Laplace and Cauchy take them)."""

from __future__ import annotations

from typing import Any, Sequence

from zgrad.distributions import constraints
from zgrad.distributions.distribution import Distribution
from zgrad.distributions.utils import broadcast_all
from zgrad.tensor import Tensor

__all__: list[str] = []


class _CentredAtLoc(Distribution):
    """A distribution whose mean and mode are its ``loc`` (symmetric and unimodal around it)."""

    loc: Tensor

    @property
    def mean(self) -> Tensor:
        """``loc``."""
        return self.loc

    @property
    def mode(self) -> Tensor:
        """``loc``."""
        return self.loc


class _LocScale(_CentredAtLoc):
    """A family with parameters ``loc`` (real) and ``scale`` (positive), tensors or numbers broadcast to
    the batch shape; its samples are real and reparameterized.

    Args:
        loc: the location.
        scale: the scale (positive).
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: with validation, a NaN loc or a scale that is not positive.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Tensor | float, scale: Tensor | float, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Any:
        """This distribution with ``loc`` and ``scale`` expanded (not copied) to ``batch_shape``.

        Raises:
            NotImplementedError: a subclass with its own ``__init__`` that did not override ``expand``.
        """
        mro = type(self).__mro__
        family = mro[mro.index(_LocScale) - 1]  # Normal for a subclass of Normal: the name errors give
        new = self._get_checked_instance(family, _instance)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        return self._finish_expand(new, batch_shape)
