"""The methods of :class:`zgrad.Tensor` that make values: the ``new_*`` factories (``new_zeros``,
``new_tensor``, ...) and the random fills and draws (``uniform_``, ``normal_``, ``random_``,
``bernoulli_``, ``exponential_``, ``log_normal_``, ``cauchy_``, ``geometric_``, ``bernoulli``,
``multinomial``).

A random fill writes into the tensor's memory through :meth:`Tensor._overwrite` (of
:mod:`zgrad.tensor_inplace`), so PyTorch's in-place rules hold: an error on a leaf that requires
grad unless grad mode is off, a zero gradient to the old value where the tensor is part of a
graph. Draws come from ``generator`` (None: the default generator).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad import creation
from zgrad.creation_random import check_floating
from zgrad.errors import DTypeError, ZgradError
from zgrad.generator import Generator
from zgrad.kernels import dispatch, dispatch_pointwise
from zgrad.ops import sampling
from zgrad.random import numpy_generator
from zgrad.tensor import Tensor, tensor_methods
from zgrad.kernels.promotion import is_floating, opmath_dtype

__all__ = ["TensorCreation"]

# random_() with no bounds draws from [0, 2**digits]: every integer the dtype holds exactly.
_FLOAT_INTEGER_DIGITS = {np.dtype(np.float16): 11, np.dtype(np.float32): 24, np.dtype(np.float64): 53}


@tensor_methods
class TensorCreation:
    """The value-making methods of :class:`zgrad.Tensor` (bound onto it; never instantiated)."""

    # --- new_* factories: this tensor's dtype and device unless given ---------------------------

    def new_tensor(self, data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
        """A new tensor holding a copy of ``data``, of this tensor's dtype and device unless given."""
        return creation.tensor(data, dtype=self.dtype if dtype is None else dtype, device=self.device if device is None else device,
                               requires_grad=requires_grad)

    def new_zeros(self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
        """Zeros of ``size`` (ints or one tuple), of this tensor's dtype and device unless given."""
        return creation.zeros(*size, dtype=self.dtype if dtype is None else dtype, device=self.device if device is None else device,
                              requires_grad=requires_grad)

    def new_ones(self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
        """Ones of ``size`` (ints or one tuple), of this tensor's dtype and device unless given."""
        return creation.ones(*size, dtype=self.dtype if dtype is None else dtype, device=self.device if device is None else device,
                             requires_grad=requires_grad)

    def new_empty(self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
        """An uninitialized tensor of ``size``, of this tensor's dtype and device unless given."""
        return creation.empty(*size, dtype=self.dtype if dtype is None else dtype, device=self.device if device is None else device,
                              requires_grad=requires_grad)

    def new_full(self, size: Any, fill_value: Any, dtype: Any = None, device: Any = None,
                 requires_grad: bool = False) -> Tensor:
        """``fill_value`` in ``size``, of this tensor's dtype and device unless given."""
        return creation.full(size, fill_value, dtype=self.dtype if dtype is None else dtype, device=self.device if device is None else device,
                             requires_grad=requires_grad)

    # --- random fills -----------------------------------------------------------------------------

    def _random_fill(self, fill: Any, generator: Generator | None) -> Tensor:
        """Overwrite every element with what ``fill(array, numpy_generator)`` writes."""
        draws = numpy_generator(generator, self.device)
        return self._overwrite(lambda array: fill(array, draws))

    def uniform_(self, a: float = 0.0, b: float = 1.0, *, generator: Generator | None = None) -> Tensor:
        """Fill with samples of U[a, b).

        Raises:
            DTypeError: a non-floating tensor.
        """
        check_floating(self.dtype, "uniform_")
        return self._random_fill(lambda array, g: dispatch_pointwise.random_uniform_(array, a, b, g), generator)

    def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator: Generator | None = None) -> Tensor:
        """Fill with samples of N(mean, std^2).

        Raises:
            DTypeError: a non-floating tensor.
            ZgradError: a negative ``std``.
        """
        check_floating(self.dtype, "normal_")
        if std < 0:
            raise ZgradError(f"normal expects std >= 0.0, but found std {std}")
        return self._random_fill(lambda array, g: dispatch_pointwise.random_normal_(array, mean, std, g), generator)

    def random_(self, from_: int = 0, to: int | None = None, *, generator: Generator | None = None) -> Tensor:
        """Fill with integers uniform in [from_, to): ``random_(to)`` draws from [0, to), and
        ``random_()`` from [0, 2**mantissa] for floats or [0, max] for integers.

        Raises:
            ZgradError: ``from_ >= to``.
        """
        if to is None and from_ != 0:  # random_(to), PyTorch's one-argument form
            from_, to = 0, from_
        if to is None:
            to = 2 ** _FLOAT_INTEGER_DIGITS[self.dtype] + 1 if is_floating(self.dtype) else \
                2 if self.dtype.kind == "b" else int(np.iinfo(self.dtype).max) + 1
        if from_ >= to:
            raise ZgradError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
        return self._random_fill(lambda array, g: dispatch_pointwise.random_integers_(array, from_, to, g), generator)

    def exponential_(self, lambd: float = 1.0, *, generator: Generator | None = None) -> Tensor:
        """Fill with samples of the exponential distribution of rate ``lambd``.

        Raises:
            DTypeError: a non-floating tensor.
            ZgradError: ``lambd`` <= 0.
        """
        check_floating(self.dtype, "exponential_")
        if not lambd > 0:
            raise ZgradError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
        return self._random_fill(lambda array, g: dispatch_pointwise.random_exponential_(array, lambd, g), generator)

    def log_normal_(self, mean: float = 1.0, std: float = 2.0, *, generator: Generator | None = None) -> Tensor:
        """Fill with samples of exp(N(mean, std^2)).

        Raises:
            DTypeError: a non-floating tensor.
            ZgradError: ``std`` <= 0.
        """
        check_floating(self.dtype, "log_normal_")
        if not std > 0:
            raise ZgradError(f"log_normal_ expects std > 0.0, but found std={std}")

        def fill(array: Any, draws: Any) -> None:
            # a half tensor draws and exponentiates in float32, rounding once, as PyTorch's kernel
            compute = opmath_dtype(array.dtype)
            work = array if compute == array.dtype else \
                dispatch.empty(array.shape, compute, dispatch.device_type_of(array))
            dispatch_pointwise.random_normal_(work, mean, std, draws)
            dispatch_pointwise.unary_inplace("exp", work)
            if work is not array:
                dispatch_pointwise.write(array, work)
        return self._random_fill(fill, generator)

    def cauchy_(self, median: float = 0.0, sigma: float = 1.0, *, generator: Generator | None = None) -> Tensor:
        """Fill with samples of the Cauchy distribution: ``median + sigma * Z1 / Z2`` for standard
        normal Z1, Z2.

        Raises:
            DTypeError: a non-floating tensor.
            ZgradError: ``sigma`` <= 0.
        """
        check_floating(self.dtype, "cauchy_")
        if not sigma > 0:
            raise ZgradError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")

        def fill(array: Any, draws: Any) -> None:
            denominator = dispatch.empty(array.shape, array.dtype, dispatch.device_type_of(array))
            dispatch_pointwise.random_normal_(array, 0.0, sigma, draws)
            dispatch_pointwise.random_normal_(denominator, 0.0, 1.0, draws)
            dispatch_pointwise.inplace_binary("div", array, denominator)
            dispatch_pointwise.inplace_binary("add", array, median)
        return self._random_fill(fill, generator)

    def geometric_(self, p: float, *, generator: Generator | None = None) -> Tensor:
        """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...):
        ``floor(E) + 1`` for E exponential of rate ``-log(1 - p)``.

        Raises:
            DTypeError: a bool tensor.
            ZgradError: ``p`` outside (0, 1).
        """
        if self.dtype.kind == "b":
            raise DTypeError("geometric_ is not implemented for bool tensors (PyTorch's rule)")
        if not 0 < p < 1:
            raise ZgradError(f"geometric_ expects p to be in (0, 1), but got p={p}")

        def fill(array: Any, draws: Any) -> None:
            exponential = dispatch.empty(array.shape, np.dtype(np.float64), dispatch.device_type_of(array))
            dispatch_pointwise.random_exponential_(exponential, -math.log1p(-p), draws)
            trials = dispatch.binary("add", dispatch.binary("floor_divide", exponential, 1.0), 1.0)
            dispatch_pointwise.write(array, trials)
        return self._random_fill(fill, generator)

    def bernoulli_(self, p: Any = 0.5, *, generator: Generator | None = None) -> Tensor:
        """Fill with 1 with probability ``p`` (a number, or a tensor broadcast to this one), else 0.

        Raises:
            ZgradError: a probability outside [0, 1].
        """
        if isinstance(p, Tensor):
            probs = p._data
            if p.numel() and not 0 <= probs.min() <= probs.max() <= 1:
                raise ZgradError("bernoulli_ expects all elements of p to be in [0, 1]")
        else:
            probs = sampling.check_probability(p, "bernoulli_")
        shape, dtype, device = self.shape, self.dtype, self.device
        return self._overwrite(lambda array: dispatch_pointwise.write(
            array, sampling.bernoulli_draw(shape, dtype, device, probs, generator)))

    # --- draws ------------------------------------------------------------------------------------

    def bernoulli(self, p: float | None = None, *, generator: Generator | None = None) -> Tensor:
        """See :func:`zgrad.bernoulli`."""
        return sampling.bernoulli(self, p, generator=generator)

    def multinomial(self, num_samples: int, replacement: bool = False, *, generator: Generator | None = None) -> Tensor:
        """See :func:`zgrad.multinomial`."""
        return sampling.multinomial(self, num_samples, replacement, generator=generator)
