"""``Chi2``: the chi-squared distribution with ``df`` degrees of freedom, Gamma(df / 2, 1 / 2)."""

from __future__ import annotations

from typing import Any, Sequence

from zgrad.distributions import constraints
from zgrad.distributions.gamma import Gamma
from zgrad.tensor import Tensor

__all__ = ["Chi2"]


class Chi2(Gamma):
    """The sum of ``df`` squared standard normal variables: exactly Gamma(0.5 df, 0.5).

    Args:
        df: the degrees of freedom (positive).
        validate_args: check the parameters and scored values (None: the default).

    Raises:
        ValueError: with validation, a df that is not positive.
    """

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df: Tensor | float, validate_args: bool | None = None) -> None:
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Chi2:
        return super().expand(batch_shape, self._get_checked_instance(Chi2, _instance))

    @property
    def df(self) -> Tensor:
        """The degrees of freedom, 2 concentration."""
        return self.concentration * 2
