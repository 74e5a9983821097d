"""The strong-Wolfe line search of :class:`zgrad.optim.LBFGS`, with cubic interpolation.

Along a descent direction ``d`` from the point ``x`` the search looks at ``phi(t) = f(x + t*d)``
and its slope ``phi'(t) = grad f(x + t*d) . d``. A step ``t`` satisfies the strong Wolfe
conditions when

- it decreases the loss enough (Armijo): ``phi(t) <= phi(0) + c1 * t * phi'(0)``, and
- the slope has flattened enough (curvature): ``|phi'(t)| <= -c2 * phi'(0)``.

The search first extrapolates until it brackets such a step (or finds one), then zooms into the
bracket, each trial step the minimizer of the cubic through the bracket's two ends, moved away from
an end when it falls too close to it. This is minFunc's and Lua torch's ``lswolfe``, as
``torch.optim.LBFGS`` implements it: the same trial steps in the same order, so both libraries
evaluate the loss at the same points.

Scalars stay what the caller gives: losses are Python floats, slopes 0-d tensors in the
parameters' dtype, so the arithmetic is rounded as PyTorch's is (in float32 for float32
parameters).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from zgrad.tensor import Tensor

__all__ = ["Trial", "cubic_minimizer", "strong_wolfe"]

# How far (relative to the last step) the bracketing phase extrapolates at least and at most.
_EXTRAPOLATE_MIN, _EXTRAPOLATE_MAX = 0.01, 10
# A zoom trial closer than this fraction of the bracket's length to one of its ends is moved there.
_ZOOM_MARGIN = 0.1


class Trial(NamedTuple):
    """One evaluated step along the direction: ``t``, the loss ``phi(t)``, the flat gradient there
    and the slope ``phi'(t)`` (the gradient's dot product with the direction)."""

    t: Any
    loss: float
    grad: Tensor
    slope: Tensor


def cubic_minimizer(a: Trial, b: Trial, bounds: tuple[Any, Any] | None = None) -> Any:
    """The minimizer of the cubic through ``a`` and ``b`` (their steps, losses and slopes),
    clamped to ``bounds`` (by default the interval between the two steps); the bounds' middle
    when the cubic has no real minimizer.

    Returns:
        The step: a Python float or a 0-d tensor, as the arithmetic on the inputs gives it.
    """
    low, high = bounds if bounds is not None else ((a.t, b.t) if a.t <= b.t else (b.t, a.t))
    d1 = a.slope + b.slope - 3 * (a.loss - b.loss) / (a.t - b.t)
    discriminant = d1 ** 2 - a.slope * b.slope
    if not discriminant >= 0:  # no real minimizer (or NaN)
        return (low + high) / 2.0
    d2 = discriminant.sqrt()
    near, far = (a, b) if a.t <= b.t else (b, a)
    minimizer = far.t - (far.t - near.t) * ((far.slope + d2 - d1) / (far.slope - near.slope + 2 * d2))
    return min(max(minimizer, low), high)


def strong_wolfe(evaluate: Callable[[Any], tuple[float, Tensor]], t: Any, direction: Tensor, start: Trial, *,
                 c1: float = 1e-4, c2: float = 0.9, tolerance_change: float = 1e-9,
                 max_iterations: int = 25) -> tuple[Trial, int]:
    """Search a step along ``direction`` from ``start`` (``t = 0``) that satisfies the strong
    Wolfe conditions, trying ``t`` first. Blocks for the evaluations it makes.

    Args:
        evaluate: ``evaluate(t)`` -> (loss, flat gradient) at ``x + t*direction``; it leaves the
            parameters at ``x``.
        t: the first step to try.
        direction: the flat descent direction.
        start: the point ``x`` itself (its slope must be negative).
        c1, c2: the sufficient-decrease and curvature constants, ``0 < c1 < c2 < 1``.
        tolerance_change: the search stops when the bracket is shorter than this along the
            direction's largest element.
        max_iterations: evaluations after the first at most.

    Returns:
        (the lowest point found, as a :class:`Trial`; the number of evaluations made).
    """
    direction_max = direction.abs().max()

    def trial(step: Any) -> Trial:
        loss, grad = evaluate(step)
        return Trial(step, loss, grad, grad.dot(direction))

    def sufficient_decrease(point: Trial) -> bool:
        return not point.loss > start.loss + c1 * point.t * start.slope

    def flat_enough(point: Trial) -> bool:
        return abs(point.slope) <= -c2 * start.slope

    previous, current = start, trial(t)
    evaluations, iteration = 1, 0
    bracket: list[Trial] = []
    found = False
    # Extrapolate until [previous, current] holds a good step, or current is one.
    while iteration < max_iterations:
        if not sufficient_decrease(current) or (iteration > 1 and current.loss >= previous.loss):
            bracket = [previous, current]
            break
        if flat_enough(current):
            bracket, found = [current], True
            break
        if current.slope >= 0:
            bracket = [previous, current]
            break
        bounds = (current.t + _EXTRAPOLATE_MIN * (current.t - previous.t), current.t * _EXTRAPOLATE_MAX)
        previous, current = current, trial(cubic_minimizer(previous, current, bounds))
        evaluations += 1
        iteration += 1
    if iteration >= max_iterations:  # out of evaluations: the better of x and the last trial
        bracket = [Trial(0, start.loss, start.grad, start.slope), current]

    # Zoom: shrink the bracket around a good step. ``low`` indexes its end with the lower loss.
    low, high = (0, 1) if bracket[0].loss <= bracket[-1].loss else (1, 0)
    insufficient_progress = False
    while not found and iteration < max_iterations:
        left, right = bracket[0].t, bracket[1].t
        if abs(right - left) * direction_max < tolerance_change:
            break
        step = cubic_minimizer(bracket[0], bracket[1])
        lowest, highest = min(left, right), max(left, right)
        margin = _ZOOM_MARGIN * (highest - lowest)
        # A step at (or too near) an end twice in a row makes no progress: move it inside.
        if min(highest - step, step - lowest) < margin:
            if insufficient_progress or step >= highest or step <= lowest:
                step = highest - margin if abs(step - highest) < abs(step - lowest) else lowest + margin
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        current = trial(step)
        evaluations += 1
        iteration += 1
        if not sufficient_decrease(current) or current.loss >= bracket[low].loss:
            bracket[high] = current
            low, high = (0, 1) if bracket[0].loss <= bracket[1].loss else (1, 0)
        else:
            if flat_enough(current):
                found = True
            elif current.slope * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = current
    return bracket[low], evaluations
