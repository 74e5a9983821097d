"""A module call with hooks, as PyTorch's ``Module.__call__``: forward pre-hooks, forward hooks
and full backward (pre-)hooks. ``Module.__call__`` comes here only when the module has a hook.

Backward hooks ride on two identity functions, as PyTorch's ``BackwardHook``: one over the
module's tensor arguments, one over its output tensors (a tensor, or a tuple's; a list or a dict
output is not hooked, as in PyTorch). In backward the output one runs first: it hands
``grad_output`` (None for an output no gradient reached or that does not require grad) to the
backward pre-hooks (which may replace it) and keeps it; the input one then hands ``grad_input``
(one entry per positional argument: zeros for a tensor that does not require grad, None for
what is not a tensor) and that ``grad_output`` to the backward hooks, which may replace
``grad_input``. When no argument requires grad, the backward hooks run at the output, with
``grad_input`` all None; when the output side never ran, they do not run.

The deprecated ``register_backward_hook`` hooks are PyTorch's too: hooks on the backward node of
the output's first tensor, which see that node's gradients.
"""

from __future__ import annotations

import warnings
from typing import Any

from zgrad.autograd.function import Function
from zgrad.engine.grad_mode import is_grad_enabled
from zgrad.tensor import Tensor

__all__ = ["call_with_hooks", "full_backward_hooks"]


def _checked_grads(replacement: Any, given: tuple, what: str, hook_kind: str = "Backward hook") -> tuple:
    """A hook's replacement for ``given`` gradients (None: keep them).

    Raises:
        RuntimeError: a replacement of another length (PyTorch's message).
    """
    if replacement is None:
        return given
    replacement = tuple(replacement) if isinstance(replacement, (tuple, list)) else (replacement,)
    if len(replacement) != len(given):
        raise RuntimeError(f"{hook_kind} returned an invalid number of grad_{what}, got {len(replacement)}, but "
                           f"expected {len(given)}")
    return replacement


class _Pass:
    """One call's backward-hook state: the module, where its tensor arguments sit among its
    positional ones, where its output tensors sit in its output (a tuple's items, or the one
    tensor), and the ``grad_output`` the output side saw, until the input side has used it."""

    def __init__(self, module: Any, positions: list[int], arguments: int) -> None:
        self.module, self.positions, self.arguments = module, positions, arguments
        self.output_places: list[int] = [0]
        self.outputs = 1
        self.grad_output: tuple | None = None

    def at_output(self, grads: tuple) -> tuple:
        full = [None] * self.outputs  # None for what is not a tensor, as PyTorch's
        for place, grad in zip(self.output_places, grads):
            full[place] = grad
        grad_output = tuple(full)
        for hook in list(self.module._backward_pre_hooks.values()):
            grad_output = _checked_grads(hook(self.module, grad_output), grad_output, "output", "Backward pre hook")
        self.grad_output = grad_output
        if not self.positions and full_backward_hooks(self.module):
            warnings.warn("Full backward hook is firing when gradients are computed with respect to module outputs since "
                          "no inputs require gradients. See the docs of zgrad.nn.Module.register_full_backward_hook "
                          "for more details.", UserWarning, stacklevel=2)
            self.at_input(())
        return tuple(grad_output[p] for p in self.output_places)

    def at_input(self, grads: tuple) -> tuple:
        if self.grad_output is None:  # the gradient did not come through the output (double backward, a list)
            return grads
        grad_input = [None] * self.arguments
        for position, grad in zip(self.positions, grads):
            grad_input[position] = grad
        packed = tuple(grad_input)
        grad_output, self.grad_output = self.grad_output, None  # used once: a later pass may not come through it
        for hook in list(full_backward_hooks(self.module).values()):
            packed = _checked_grads(hook(self.module, packed, grad_output), packed, "input")
        return tuple(packed[p] for p in self.positions)


def _identity(ctx: Any, state: _Pass, tensors: tuple) -> tuple:
    ctx.state = state
    ctx.mark_non_differentiable(*(t for t in tensors if not t.requires_grad))
    return tensors


class _OutputSide(Function):
    @staticmethod
    def forward(ctx: Any, state: _Pass, *tensors: Tensor) -> tuple:
        ctx.set_materialize_grads(False)  # grad_output has None where no gradient came
        return _identity(ctx, state, tensors)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        return (None, *ctx.state.at_output(grads))


class _InputSide(Function):
    @staticmethod
    def forward(ctx: Any, state: _Pass, *tensors: Tensor) -> tuple:
        return _identity(ctx, state, tensors)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        return (None, *ctx.state.at_input(grads))


def _through(side: type, state: _Pass, tensors: list[Tensor]) -> list[Tensor]:
    result = side.apply(state, *tensors)
    return [result] if isinstance(result, Tensor) else list(result)


def _hook_outputs(state: _Pass, output: Any) -> Any:
    """``output`` (a tensor, or a tuple of them and other values) with its tensors passed through
    the output side, when one of them requires grad."""
    if isinstance(output, Tensor):
        return _through(_OutputSide, state, [output])[0] if output.requires_grad else output
    if isinstance(output, tuple):
        places = [i for i, item in enumerate(output) if isinstance(item, Tensor)]
        if any(output[i].requires_grad for i in places):
            state.output_places, state.outputs = places, len(output)
            items = list(output)
            for i, hooked in zip(places, _through(_OutputSide, state, [items[i] for i in places])):
                items[i] = hooked
            return type(output)(*items) if hasattr(output, "_fields") else type(output)(items)
    return output


def call_with_hooks(module: Any, args: tuple, kwargs: dict) -> Any:
    """Run ``module.forward(*args, **kwargs)`` with its hooks, in PyTorch's order.

    Raises:
        RuntimeError: a pre-hook with kwargs that returns something other than (args, kwargs)
            (PyTorch's message).
    """
    for key, hook in list(module._forward_pre_hooks.items()):
        if key in module._forward_pre_hooks_with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                       f"but got {result}.")
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    state = None
    if (full_backward_hooks(module) or module._backward_pre_hooks) and is_grad_enabled():
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not any(args[i].requires_grad for i in positions):
            positions = []
        state = _Pass(module, positions, len(args))
        if positions:
            items = list(args)
            for i, hooked in zip(positions, _through(_InputSide, state, [items[i] for i in positions])):
                items[i] = hooked
            args = tuple(items)
    try:
        output = module.forward(*args, **kwargs)
    except BaseException:
        for key, hook in list(module._forward_hooks.items()):
            if key in module._forward_hooks_always_called:
                try:
                    hook(module, args, kwargs, None) if key in module._forward_hooks_with_kwargs \
                        else hook(module, args, None)
                except Exception:  # noqa: BLE001 - the forward's own error is the one to raise
                    pass
        raise
    for key, hook in list(module._forward_hooks.items()):
        result = hook(module, args, kwargs, output) if key in module._forward_hooks_with_kwargs \
            else hook(module, args, output)
        if result is not None:
            output = result
    if state is not None:
        output = _hook_outputs(state, output)
    if module._is_full_backward_hook is False and module._backward_hooks and is_grad_enabled():
        _hook_last_node(module, args, output)
    return output


def full_backward_hooks(module: Any) -> dict:
    """The module's ``register_full_backward_hook`` hooks (its ``_backward_hooks`` hold either
    those or the deprecated ``register_backward_hook`` ones, as PyTorch's)."""
    return module._backward_hooks if module._is_full_backward_hook is not False else {}


def _first_tensor(value: Any) -> Any:
    """The tensor PyTorch hooks a deprecated backward hook on: the output's first one (a dict's
    first tensor value, a sequence's first item, recursively); None when there is none."""
    while not isinstance(value, Tensor):
        if isinstance(value, dict):
            value = next((v for v in value.values() if isinstance(v, Tensor)), None)
        elif isinstance(value, (tuple, list)) and value:
            value = value[0]
        else:
            return None
    return value


def _hook_last_node(module: Any, args: tuple, output: Any) -> None:
    """Register the deprecated backward hooks on the backward node of the output's first tensor:
    each is called ``hook(module, grad_input, grad_output)`` with that node's gradients."""
    first = _first_tensor(output)
    node = None if first is None else first.grad_fn
    if node is None:
        return
    for hook in list(module._backward_hooks.values()):
        node.register_hook(lambda grad_input, grad_output, hook=hook: hook(module, grad_input, grad_output))
    _warn_partial_grads(args, output, node)


_DEPRECATED = "is deprecated and will be removed in future versions. This hook will be missing some"
_FULL_INSTEAD = "Please use register_full_backward_hook to get the documented behavior."


def _warn_partial_grads(args: tuple, output: Any, node: Any) -> None:
    """PyTorch's FutureWarnings for the cases where a deprecated backward hook misses gradients."""
    outputs = (output,) if isinstance(output, Tensor) else output
    if not (isinstance(outputs, tuple) and all(isinstance(o, Tensor) for o in outputs)):
        message = ("Using non-full backward hooks on a Module that does not return a single Tensor or a tuple of "
                   f"Tensors {_DEPRECATED} of the grad_output. {_FULL_INSTEAD}")
    elif not all(isinstance(a, Tensor) for a in args):
        message = ("Using non-full backward hooks on a Module that does not take as input a single Tensor or a tuple "
                   f"of Tensors {_DEPRECATED} of the grad_input. {_FULL_INSTEAD}")
    else:
        output_nodes = {id(o.grad_fn): o.grad_fn for o in outputs if o.grad_fn is not None}
        if not output_nodes or (len(output_nodes) == 1 and id(node) not in output_nodes):
            message = ("Using a non-full backward hook when outputs are nested in python data structure "
                       f"{_DEPRECATED} grad_output.")
        elif len(output_nodes) > 1:
            message = ("Using a non-full backward hook when outputs are generated by different autograd Nodes "
                       f"{_DEPRECATED} grad_output. {_FULL_INSTEAD}")
        elif {id(a.grad_fn) for a in args if a.grad_fn is not None} != {id(n) for n, _ in node.next_functions}:
            message = ("Using a non-full backward hook when the forward contains multiple autograd Nodes "
                       f"{_DEPRECATED} grad_input. {_FULL_INSTEAD}")
        else:
            return
    warnings.warn(message, FutureWarning, stacklevel=5)
