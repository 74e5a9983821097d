"""PyTorch's top-level in-place functions (``torch.relu_(x)``, ``torch.exp_(x)``,
``torch.clamp_(x, min, max)``, ...): each is the Tensor method of its name called on its first
argument, made by one factory, so a function and its method cannot disagree.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = [
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_",
    "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_",
    "deg2rad_", "detach_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_", "floor_", "frac_", "gcd_", "i0_",
    "index_put_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_",
    "negative_", "rad2deg_", "reciprocal_", "relu_", "resize_as_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_",
    "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "xlogy_",
]


def _method_of_first_argument(name: str) -> Callable[..., Any]:
    """``zgrad.<name>(input, *args, **kwargs)``: ``input.<name>(*args, **kwargs)``."""
    def function(input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002 - torch's argument name
        return getattr(input, name)(*args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"In place: ``input.{name}(...)`` (see :meth:`zgrad.Tensor.{name}`); returns ``input``."
    return function


(abs_, acos_, acosh_, addmv_, arccos_, arccosh_, arcsin_, arcsinh_, arctan_, arctanh_, asin_, asinh_, atan_, atanh_,
 ceil_, clamp_, clamp_max_, clamp_min_, clip_, cos_, cosh_, deg2rad_, detach_, erf_, erfc_, exp2_, exp_, expm1_,
 fix_, floor_, frac_, gcd_, i0_, index_put_, lcm_, ldexp_, log10_, log1p_, log2_, log_, logit_, nan_to_num_, neg_,
 negative_, rad2deg_, reciprocal_, relu_, resize_as_, round_, rsqrt_, sigmoid_, sin_, sinc_, sinh_, sqrt_, square_,
 tan_, tanh_, trunc_, xlogy_) = (_method_of_first_argument(name) for name in __all__)
