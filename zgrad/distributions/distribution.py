"""``Distribution``: the base class of every distribution, as torch.distributions.Distribution.

It holds the batch and event shapes, checks the parameters against ``arg_constraints`` when
built and a value against ``support`` before scoring it (``validate_args``; on unless Python runs
with ``-O``, or set for all with :meth:`Distribution.set_default_validate_args`), and names the
methods a distribution provides (``sample``, ``rsample``, ``log_prob``, ``cdf``, ``icdf``,
``entropy``, ``enumerate_support``, the moments).
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

from zgrad.distributions import constraints
from zgrad.distributions.utils import lazy_property
from zgrad.engine.grad_mode import no_grad
from zgrad.memory_formats import Size
from zgrad.tensor import Tensor

__all__ = ["Distribution"]


class Distribution:
    """The base of the distributions: ``batch_shape`` (independent, differently parameterized
    distributions) and ``event_shape`` (the shape of one draw).

    Args:
        batch_shape: the shape the parameters are batched over.
        event_shape: the shape of a single sample.
        validate_args: check parameters and values (None: the class default, see
            :meth:`set_default_validate_args`).

    Raises:
        ValueError: with validation on, a parameter outside its constraint (the message names the
            parameter, its shape, the distribution and the constraint, and shows the values).
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for every distribution built later without an explicit
        ``validate_args`` (on by default, off under ``python -O``).

        Raises:
            ValueError: ``value`` is not a bool.
        """
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args expects True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape: Sequence[int] = Size(), event_shape: Sequence[int] = Size(),
                 validate_args: bool | None = None) -> None:
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._check_parameters()

    def _check_parameters(self) -> None:
        try:
            arg_constraints = self.arg_constraints
        except NotImplementedError:
            arg_constraints = {}
            warnings.warn(f"{type(self)} does not define `arg_constraints`. Please set `arg_constraints = {{}}` or "
                          "initialize the distribution with `validate_args=False` to turn off validation.",
                          stacklevel=3)
        for name, constraint in arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue
            if name not in self.__dict__ and isinstance(getattr(type(self), name, None), lazy_property):
                continue  # the parameter derived from the one given; checked if and when it is computed
            value = getattr(self, name)
            if not bool(constraint.check(value).all()):
                raise ValueError(f"Expected parameter {name} ({type(value).__name__} of shape {tuple(value.shape)}) "
                                 f"of distribution {self!r} to satisfy the constraint {constraint!r}, but found "
                                 f"invalid values:\n{value}")

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Distribution:
        """A new distribution of the same kind with its parameters expanded (not copied) to
        ``batch_shape``; the parameters are not checked again."""
        raise NotImplementedError

    @property
    def batch_shape(self) -> Size:
        """The shape the parameters are batched over."""
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        """The shape of a single sample."""
        return self._event_shape

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:
        """Each parameter's name and the constraint its values must satisfy."""
        raise NotImplementedError

    @property
    def support(self) -> constraints.Constraint:
        """The constraint every sample satisfies."""
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        """The mean, of shape batch_shape + event_shape."""
        raise NotImplementedError

    @property
    def mode(self) -> Tensor:
        """The mode, of shape batch_shape + event_shape."""
        raise NotImplementedError(f"{type(self)} does not implement mode")

    @property
    def variance(self) -> Tensor:
        """The variance, of shape batch_shape + event_shape."""
        raise NotImplementedError

    @property
    def stddev(self) -> Tensor:
        """The standard deviation: the square root of the variance."""
        return self.variance.sqrt()

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        """A sample of shape sample_shape + batch_shape + event_shape from the default generator of the
        parameters' device, outside the autograd graph."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        """A reparameterized sample (gradients flow to the parameters) of shape
        sample_shape + batch_shape + event_shape."""
        raise NotImplementedError

    def sample_n(self, n: int) -> Tensor:
        """``n`` samples (deprecated: use ``sample((n,))``)."""
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.", FutureWarning, stacklevel=2)
        return self.sample(Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        """The log of the density (or mass) at ``value``."""
        raise NotImplementedError

    def cdf(self, value: Tensor) -> Tensor:
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError

    def icdf(self, value: Tensor) -> Tensor:
        """The inverse of the cumulative distribution function at ``value``."""
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """Every value of a discrete distribution's support along dimension 0, batched in lock-step:
        shape (cardinality,) + batch_shape + event_shape, or with the batch dimensions as 1s when
        ``expand`` is False."""
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """The entropy, of shape batch_shape."""
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        """exp(entropy), of shape batch_shape."""
        return self.entropy().exp()

    def _extended_shape(self, sample_shape: Sequence[int] = Size()) -> Size:
        """sample_shape + batch_shape + event_shape.

        Raises:
            TypeError: ``sample_shape`` is an int instead of a sequence of ints.
        """
        if isinstance(sample_shape, int):
            raise TypeError(f"sample_shape must be a tuple of ints (e.g. ({sample_shape},)), got {sample_shape}")
        return Size(tuple(int(n) for n in sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value: Tensor) -> None:
        """Check that ``value`` can be scored: a Tensor whose rightmost dimensions are the event shape,
        broadcastable with batch_shape + event_shape, inside the support.

        Raises:
            ValueError: any of those fails (PyTorch's messages).
        """
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_start = value.ndim - len(self._event_shape)
        if value.shape[event_start:] != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: {value.shape} vs "
                             f"{self._event_shape}.")
        actual, expected = value.shape, self._batch_shape + self._event_shape
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual} vs {expected}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{type(self)} does not define `support` to enable sample validation. Please initialize "
                          "the distribution with `validate_args=False` to turn off validation.", stacklevel=3)
            return
        if not bool(support.check(value).all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be "
                             f"within the support ({support!r}) of the distribution {self!r}, but found invalid "
                             f"values:\n{value}")

    def _get_checked_instance(self, cls: type, _instance: Any = None) -> Any:
        """``_instance``, or a bare new instance of this class for :meth:`expand` to fill.

        Raises:
            NotImplementedError: a subclass with its own ``__init__`` that did not override ``expand``.
        """
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom "
                                      "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def _finish_expand(self, new: Distribution, batch_shape: Sequence[int],
                       event_shape: Sequence[int] | None = None) -> Any:
        """Give ``new`` (an :meth:`expand` copy whose parameters are set) its shapes, without checking
        them again, and this distribution's validation setting."""
        Distribution.__init__(new, batch_shape, self._event_shape if event_shape is None else event_shape,
                              validate_args=False)
        new._validate_args = self._validate_args
        return new

    def __repr__(self) -> str:
        shown = [name for name in self.arg_constraints if name in self.__dict__]
        parts = [f"{name}: {self.__dict__[name] if self.__dict__[name].numel() == 1 else self.__dict__[name].shape}"
                 for name in shown]
        return f"{type(self).__name__}({', '.join(parts)})"
