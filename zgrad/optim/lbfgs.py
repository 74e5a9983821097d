"""L-BFGS, as ``torch.optim.LBFGS``: a quasi-Newton method that re-evaluates the loss through a
closure, on the parameters flattened into one vector."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from zgrad.engine.grad_mode import enable_grad, no_grad
from zgrad.ops import cat
from zgrad.optim._line_search import Trial, strong_wolfe
from zgrad.optim._state import as_arrays, as_tensors
from zgrad.optim.optimizer import Optimizer, check_non_negative
from zgrad.tensor import Tensor

__all__ = ["LBFGS"]

# A curvature pair (s, y) joins the history only when y.s exceeds this (else the inverse-Hessian
# estimate would lose positive definiteness).
_MIN_CURVATURE = 1e-10
_ONE_GROUP = "LBFGS doesn't support per-parameter options (parameter groups)"


class LBFGS(Optimizer):
    """L-BFGS as ``torch.optim.LBFGS`` (after minFunc): each :meth:`step` runs up to ``max_iter``
    iterations of L-BFGS, evaluating the loss through the closure up to about ``max_eval`` times.

    Each iteration takes the direction ``d = -H g`` from the last ``history_size`` curvature pairs
    (step ``s`` and gradient change ``y``) by the two-loop recursion, then moves the parameters by
    ``t * d``: ``t = lr`` (the first iteration ever: ``min(1, 1/|g|_1) * lr``), or with
    ``line_search_fn="strong_wolfe"`` the step a strong-Wolfe line search finds, starting from
    that ``t`` (:mod:`zgrad.optim._line_search`). A step stops early when the gradient's largest
    element is at most ``tolerance_grad``, or when the loss or the parameters change by less than
    ``tolerance_change``.

    All parameters form one vector, so there is one parameter group; its state lives, as in
    PyTorch, on the first parameter, under PyTorch's keys: ``func_evals`` and ``n_iter`` (ints
    over all steps), ``d`` and ``prev_flat_grad`` (flat arrays), ``t``, ``H_diag`` (numbers or 0-d
    arrays), ``prev_loss`` (a float), ``old_dirs`` (the y's), ``old_stps`` (the s's), ``ro``
    (the 1/(y.s)) and ``al`` (the recursion's scratch), lists of arrays. ``state_dict`` and
    ``load_state_dict`` carry them as PyTorch's does. Memory: about ``2 * history_size + 4``
    vectors of the parameters' size.

    Args:
        params: the parameters (tensors, or one dict ``{"params": [...], **options}``).
        lr: learning rate: the fixed step, or the line search's first trial (a number, or a
            one-element tensor).
        max_iter: iterations per :meth:`step` at most.
        max_eval: closure evaluations per :meth:`step`; default ``max_iter * 5 // 4``.
        tolerance_grad: stop when the gradient's largest absolute element is at most this.
        tolerance_change: stop when the loss, or every parameter, changes by less than this.
        history_size: curvature pairs kept.
        line_search_fn: None (fixed steps of ``lr``) or ``"strong_wolfe"``.

    Raises:
        ValueError: a negative ``lr``, a tensor ``lr`` of more than one element, or more than one
            parameter group (PyTorch's messages).

    Example::

        optimizer = zgrad.optim.LBFGS(model.parameters(), lr=0.8, line_search_fn="strong_wolfe")

        def closure():
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            return loss

        optimizer.step(closure)
    """

    _state_shaped_like_params = False

    def __init__(self, params: Iterable[Any], lr: float | Tensor = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        check_non_negative(lr=lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add the one parameter group (see :meth:`Optimizer.add_param_group`).

        Raises:
            ValueError: the optimizer has its group already (PyTorch's message; PyTorch's LBFGS
                refuses a second group when built, and fails its next step after a later one).
        """
        if self.param_groups:
            raise ValueError(_ONE_GROUP)
        super().add_param_group(param_group)

    def step(self, closure: Callable[[], Any]) -> Any:  # type: ignore[override]
        """Run up to ``max_iter`` L-BFGS iterations. Blocks for the closure's evaluations; steps
        are serialized by the optimizer's lock, which the closure must not take (by stepping or
        reading ``state_dict()`` of this optimizer).

        Args:
            closure: clears the gradients, computes the loss, calls ``backward()`` on it and
                returns it; it runs with gradients enabled, the parameters moved along the
                search direction.

        Returns:
            What the first evaluation of ``closure`` returned (the loss before the step).

        Raises:
            TypeError: ``closure`` is None or not callable.
            RuntimeError: ``line_search_fn`` is neither None nor ``"strong_wolfe"`` (PyTorch's
                message).
        """
        if not callable(closure):
            raise TypeError(f"LBFGS.step needs a closure that clears the gradients, computes the loss, calls "
                            f"backward() on it and returns it; got {type(closure).__name__}")
        group = self.param_groups[0]
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            raise RuntimeError("only 'strong_wolfe' is supported")
        with self._lock, no_grad():
            return self._step(enable_grad()(closure), group)

    def step_with_gradients(self, gradients: Mapping[Tensor, Any]) -> None:
        """Not supported: an L-BFGS step evaluates the loss several times, through a closure.

        Raises:
            NotImplementedError: always; call ``step(closure)``.
        """
        raise NotImplementedError("LBFGS cannot step from given gradients: it re-evaluates the loss and its "
                                  "gradient several times a step; call step(closure) instead")

    def _step(self, closure: Callable[[], Any], group: dict[str, Any]) -> Any:
        params = group["params"]
        lr = group["lr"].reshape(()) if isinstance(group["lr"], Tensor) else group["lr"]
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        state = self.state[params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        first_loss = closure()
        loss = float(first_loss)
        evaluations = 1
        state["func_evals"] += 1
        flat_grad = _flat_grad(params)
        if flat_grad.abs().max() <= tolerance_grad:
            return first_loss

        # the previous steps' state, its arrays as tensors sharing their memory
        previous = {key: as_tensors(state.get(key)) for key in
                    ("d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad", "prev_loss", "al")}
        d, t, h_diag = previous["d"], previous["t"], previous["H_diag"]
        grad_diffs, steps, ro, al = previous["old_dirs"], previous["old_stps"], previous["ro"], previous["al"]
        prev_flat_grad, prev_loss = previous["prev_flat_grad"], previous["prev_loss"]
        converged = False
        iteration = 0
        while iteration < max_iter:
            iteration += 1
            state["n_iter"] += 1
            first_ever = state["n_iter"] == 1
            if first_ever:
                d = flat_grad.neg()
                grad_diffs, steps, ro, h_diag = [], [], [], 1
            else:
                y, s = flat_grad.sub(prev_flat_grad), d.mul(t)
                curvature = y.dot(s)
                if curvature > _MIN_CURVATURE:
                    if len(grad_diffs) == history_size:
                        for history in (grad_diffs, steps, ro):
                            del history[0]
                    grad_diffs.append(y)
                    steps.append(s)
                    ro.append(1.0 / curvature)
                    h_diag = curvature / y.dot(y)
                if al is None:
                    al = state["al"] = [None] * history_size  # in the state now: PyTorch's key order
                d = _two_loop_direction(flat_grad, grad_diffs, steps, ro, h_diag, al)
            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr if first_ever else lr
            slope = flat_grad.dot(d)
            if slope > -tolerance_change:  # not a descent direction (any more)
                break
            if group["line_search_fn"] == "strong_wolfe":
                start = [p.clone() for p in params]
                # the search's own tolerance_change (1e-9), not the group's, as in PyTorch
                best, used = strong_wolfe(lambda trial_t: _evaluate_along(closure, params, start, trial_t, d), t, d,
                                          Trial(0, loss, flat_grad, slope), max_iterations=max_eval - evaluations)
                loss, flat_grad, t = best.loss, best.grad, best.t
                _move(params, t, d)
                converged = bool(flat_grad.abs().max() <= tolerance_grad)
            else:
                _move(params, t, d)
                used = 0
                if iteration != max_iter:  # the last iteration's loss would go unused
                    loss = float(closure())
                    flat_grad = _flat_grad(params)
                    converged = bool(flat_grad.abs().max() <= tolerance_grad)
                    used = 1
            evaluations += used
            state["func_evals"] += used

            if iteration == max_iter or evaluations >= max_eval or converged:
                break
            if d.mul(t).abs().max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break

        kept = dict(d=d, t=t, old_dirs=grad_diffs, old_stps=steps, ro=ro, H_diag=h_diag, prev_flat_grad=prev_flat_grad,
                    prev_loss=prev_loss)
        if al is not None:
            kept["al"] = al
        state.update({key: as_arrays(value) for key, value in kept.items()})
        return first_loss


def _two_loop_direction(flat_grad: Tensor, grad_diffs: list[Tensor], steps: list[Tensor], ro: list[Tensor],
                        h_diag: Any, al: list[Any]) -> Tensor:
    """``-H g`` for the inverse-Hessian estimate ``H`` of the curvature pairs, by the two-loop
    recursion on one buffer; ``al`` (at least as long as the history) receives the first loop's
    coefficients."""
    q = flat_grad.neg()
    for i in reversed(range(len(grad_diffs))):
        al[i] = steps[i].dot(q) * ro[i]
        q.add_(grad_diffs[i], alpha=-al[i])
    direction = q.mul(h_diag)
    for i in range(len(grad_diffs)):
        beta = grad_diffs[i].dot(direction) * ro[i]
        direction.add_(steps[i], alpha=al[i] - beta)
    return direction


def _flat_grad(params: list[Tensor]) -> Tensor:
    """The parameters' gradients in one new vector (zeros for a parameter without one)."""
    return cat([p.grad.reshape(-1) if p.grad is not None else p.new_zeros(p.numel()) for p in params], 0)


def _move(params: list[Tensor], t: Any, direction: Tensor) -> None:
    """Add ``t * direction`` to the parameters, in place (``direction`` is their flat layout)."""
    offset = 0
    for p in params:
        size = p.numel()
        p.add_(direction[offset:offset + size].view_as(p), alpha=t)
        offset += size


def _evaluate_along(closure: Callable[[], Any], params: list[Tensor], start: list[Tensor], t: Any,
                    direction: Tensor) -> tuple[float, Tensor]:
    """The loss and flat gradient at ``start + t * direction``; the parameters are left at ``start``
    (the parameters' values on entry)."""
    _move(params, t, direction)
    loss = float(closure())
    flat_grad = _flat_grad(params)
    for p, value in zip(params, start):
        p.copy_(value)
    return loss, flat_grad
