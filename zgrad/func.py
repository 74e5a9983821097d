"""``zgrad.func``, as ``torch.func``: ``functional_call``, ``stack_module_state``, ``grad``,
``grad_and_value``, ``vmap``, ``jacrev``, ``jacfwd``, ``hessian``, ``vjp`` and ``jvp``, built on
zgrad's autograd.

The transforms compose (``vmap(grad(f))`` gives per-sample gradients, ``jacrev(jacrev(f))`` a
Hessian): each differentiates with ``autograd.grad``, recording its own pass when its inputs come
from an enclosing transform, so the result can be differentiated again. Two differences from
PyTorch's, which transforms programs instead of running them:

- ``vmap`` runs the function once per element of the mapped dimension and stacks the results.
  The values are the same; the time is that of a Python loop over the batch. ``randomness``
  follows PyTorch: ``'error'`` refuses a random draw inside, ``'different'`` draws anew for each
  element, ``'same'`` draws the same values for all.
- ``jacfwd`` and ``jvp`` compute in reverse mode (zgrad has no forward-mode AD): the values are
  the same, the cost grows with the output's size rather than the input's.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from zgrad.autograd.functional import jvp as _reverse_jvp
from zgrad.autograd.gradients import grad as _autograd_grad
from zgrad.engine.grad_mode import enable_grad, is_grad_enabled
from zgrad.ops.functions import stack
from zgrad.random import cuda_default_generator, default_generator
from zgrad.tensor import Tensor
from zgrad.utils.tensor_tree import replace_tensors, tensors_in

__all__ = ["functional_call", "stack_module_state", "grad", "grad_and_value", "vmap", "jacrev", "jacfwd", "hessian", "vjp",
           "jvp"]


# --- functional_call ------------------------------------------------------------------------------

def functional_call(module: Any, parameter_and_buffer_dicts: Any, args: Any = None, kwargs: dict | None = None, *,
                    tie_weights: bool = True, strict: bool = False) -> Any:
    """Call ``module(*args, **kwargs)`` with some of its parameters and buffers replaced by the
    given tensors (by dotted name), as ``torch.func.functional_call``; the module is as before
    afterwards. With ``tie_weights``, a name that shares its tensor with a replaced one (tied
    weights) is replaced too.

    Raises:
        ValueError: a name given in two of the dicts (PyTorch's message).
        RuntimeError: with ``strict``, missing or unexpected names (PyTorch's message).
    """
    dicts = [parameter_and_buffer_dicts] if isinstance(parameter_and_buffer_dicts, dict) \
        else list(parameter_and_buffer_dicts)
    given: dict[str, Any] = {}
    for d in dicts:
        repeated = sorted(set(given) & set(d))
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is ambiguous")
        given.update(d)
    slots = _tensor_slots(module)
    if strict:
        _check_strict(module, given, slots)
    if tie_weights:
        by_tensor: dict[int, Any] = {id(slots[name][2]): value for name, value in given.items() if name in slots}
        given = {**{name: by_tensor[id(t)] for name, (_, _, t) in slots.items() if id(t) in by_tensor}, **given}
    replaced = []
    try:
        for name, value in given.items():
            if name in slots:
                store, leaf, original = slots[name]
                store[leaf] = value
                replaced.append((store, leaf, original))
        args = () if args is None else args if isinstance(args, tuple) else (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for store, leaf, original in reversed(replaced):
            store[leaf] = original


def stack_module_state(models: Sequence[Any]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """The parameters and the buffers of same-shaped ``models``, each stacked along a new first
    dimension, as ``torch.func.stack_module_state`` (for ``vmap`` over an ensemble with
    :func:`functional_call`); stacked parameters are new leaves that require grad where all of
    their parts do.

    Raises:
        RuntimeError: no models, or models of different kinds (PyTorch's messages).
    """
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if len({type(m) for m in models}) > 1:
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(parts: list[Tensor]) -> Tensor:
        result = stack([p.detach() for p in parts])
        return result.requires_grad_() if all(p.requires_grad for p in parts) else result

    params = {name: stacked([dict(m.named_parameters())[name] for m in models]) for name, _ in
              models[0].named_parameters()}
    buffers = {name: stacked([dict(m.named_buffers())[name] for m in models]) for name, _ in
               models[0].named_buffers()}
    return params, buffers


def _tensor_slots(module: Any) -> dict[str, tuple[dict, str, Any]]:
    """Every parameter and buffer by dotted name (tied ones under each of their names): the dict
    that holds it, its key there, and the tensor."""
    slots = {}
    for prefix, sub in module.named_modules(remove_duplicate=False):
        for store in (sub._parameters, sub._buffers):
            for leaf, tensor in store.items():
                if tensor is not None:
                    slots[f"{prefix}.{leaf}" if prefix else leaf] = (store, leaf, tensor)
    return slots


def _check_strict(module: Any, given: dict, slots: dict) -> None:
    unexpected = [name for name in given if name not in slots]
    missing = [name for name in slots if name not in given]
    if unexpected or missing:
        parts = []
        if unexpected:
            parts.append("Unexpected key(s): " + ", ".join(repr(k) for k in unexpected) + ".")
        if missing:
            parts.append("Missing key(s): " + ", ".join(repr(k) for k in missing) + ".")
        raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t" + "\n\t".join(parts))


# --- differentiation ------------------------------------------------------------------------------

def _argnums(argnums: Any, count: int, name: str) -> tuple[int, ...]:
    """``argnums`` as a tuple of non-negative positions.

    Raises:
        RuntimeError: a position out of range (PyTorch's message).
    """
    many = argnums if isinstance(argnums, tuple) else (argnums,)
    for n in many:
        if not isinstance(n, int) or not -count <= n < count:
            raise RuntimeError(f"{name}: Got argnums={argnums} but only {count} positional inputs")
    return tuple(n % count for n in many)


def _differentiable(value: Any) -> Any:
    """``value``'s tensors as new graph inputs: a view when they already take part in an
    enclosing transform's graph (so its pass reaches them), a fresh leaf otherwise."""
    return replace_tensors(value, iter([t.view_as(t) if t.requires_grad else t.detach().requires_grad_()
                                 for t in tensors_in(value)]))


def _outer_graph(value: Any) -> bool:
    return is_grad_enabled() and any(t.requires_grad for t in tensors_in(value))


def _split_aux(result: Any, has_aux: bool, name: str) -> tuple[Any, Any]:
    if not has_aux:
        return result, None
    if not (isinstance(result, tuple) and len(result) == 2):
        raise RuntimeError(f"{name}(f)(*args): output of function f should be a tuple: (output, aux) if has_aux is "
                           "True")
    return result


def grad_and_value(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable:
    """A function returning ``(gradient, value)`` of ``func``'s scalar output with respect to the
    arguments ``argnums`` (a tuple of gradients for a tuple), as ``torch.func.grad_and_value``;
    with ``has_aux``, ``func`` returns ``(output, aux)`` and the value is ``(output, aux)``.

    Raises:
        RuntimeError: an output that is not a one-element tensor (PyTorch's message).
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        positions = _argnums(argnums, len(args), "grad_and_value(f)(*args)")
        chosen = [args[i] for i in positions]
        keep_graph = _outer_graph(chosen)
        with enable_grad():
            inputs = [_differentiable(a) for a in chosen]
            call_args = list(args)
            for i, value in zip(positions, inputs):
                call_args[i] = value
            output, aux = _split_aux(func(*call_args, **kwargs), has_aux, "grad_and_value")
            if not isinstance(output, Tensor):
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                                   f"{type(output)}")
            if output.numel() != 1:
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                                   f"tensor with {output.ndim} dims. Maybe you wanted to use the vjp or jacrev APIs "
                                   "instead?")
            leaves = tensors_in(inputs)
            found = _autograd_grad(output, leaves, allow_unused=True, materialize_grads=True,
                                   create_graph=keep_graph) if output.requires_grad else \
                [t.new_zeros(t.shape) for t in leaves]
        found = iter(g if keep_graph else g.detach() for g in found)
        grads = [replace_tensors(value, found) for value in inputs]
        gradient = grads[0] if isinstance(argnums, int) else tuple(grads)
        value = output if keep_graph else output.detach()
        return gradient, ((value, aux) if has_aux else value)

    return wrapper


def grad(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable:
    """A function returning the gradient of ``func``'s scalar output with respect to the
    arguments ``argnums``, as ``torch.func.grad`` (with ``has_aux``: ``(gradient, aux)``)."""
    both = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        gradient, value = both(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient

    return wrapper


def vjp(func: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``(func(*primals), vjp_fn)``, as ``torch.func.vjp``: ``vjp_fn(cotangents)`` returns the
    tuple of vector-Jacobian products, one per primal (``(output, vjp_fn, aux)`` with ``has_aux``)."""
    keep_graph = _outer_graph(primals)
    with enable_grad():
        inputs = [_differentiable(p) for p in primals]
        output, aux = _split_aux(func(*inputs), has_aux, "vjp")
    outputs = tensors_in(output)

    def vjp_fn(cotangents: Any) -> tuple:
        given = tensors_in(cotangents)
        with enable_grad():
            pairs = [(o, c) for o, c in zip(outputs, given) if o.requires_grad]
            leaves = tensors_in(inputs)
            found = _autograd_grad([o for o, _ in pairs], leaves, [c for _, c in pairs], retain_graph=True,
                                   create_graph=keep_graph or _outer_graph(given), allow_unused=True,
                                   materialize_grads=True) if pairs else [t.new_zeros(t.shape) for t in leaves]
        found = iter(found)
        return tuple(replace_tensors(value, found) for value in inputs)

    shown = output if keep_graph else replace_tensors(output, iter([t.detach() for t in outputs]))
    return (shown, vjp_fn, aux) if has_aux else (shown, vjp_fn)


def jacrev(func: Callable, argnums: int | tuple[int, ...] = 0, *, has_aux: bool = False,
           chunk_size: int | None = None) -> Callable:
    """A function returning the Jacobian of ``func`` with respect to the arguments ``argnums``, as
    ``torch.func.jacrev``: for an output of shape O and an input of shape I, a tensor of shape
    O + I (tuples of them for several outputs or arguments). Computed by one vector-Jacobian
    product per output element."""

    @functools.wraps(func)
    def wrapper(*args: Any) -> Any:
        positions = _argnums(argnums, len(args), "jacrev(f)(*args)")
        keep_graph = _outer_graph([args[i] for i in positions])
        with enable_grad():
            call_args = list(args)
            for i in positions:
                call_args[i] = _differentiable(args[i])
            inputs = [call_args[i] for i in positions]
            output, aux = _split_aux(func(*call_args), has_aux, "jacrev")
            outputs = tensors_in(output)
            per_output = [_jacobian_rows(o, inputs, keep_graph) for o in outputs]
        if isinstance(argnums, int):
            per_output = [rows[0] for rows in per_output]
        else:
            per_output = [tuple(rows) for rows in per_output]
        result = replace_tensors(output, iter(per_output))
        return (result, aux) if has_aux else result

    return wrapper


def _jacobian_rows(output: Tensor, inputs: list[Tensor], keep_graph: bool) -> list[Tensor]:
    """d output / d input for each input, of shape output.shape + input.shape."""
    flat = output.reshape(-1)
    rows: list[list[Tensor]] = [[] for _ in inputs]
    for k in range(flat.numel()):
        if output.requires_grad:
            found = _autograd_grad(flat[k], inputs, retain_graph=True, create_graph=keep_graph, allow_unused=True,
                                   materialize_grads=True)
        else:
            found = [t.new_zeros(t.shape) for t in inputs]
        for row, g in zip(rows, found):
            row.append(g if keep_graph else g.detach())
    return [stack(row).reshape(*output.shape, *t.shape) if row else t.new_zeros((*output.shape, *t.shape))
            for row, t in zip(rows, inputs)]


def jacfwd(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable:
    """``torch.func.jacfwd``: the same Jacobian as :func:`jacrev` (zgrad computes it in reverse
    mode)."""
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func: Callable, argnums: int | tuple[int, ...] = 0) -> Callable:
    """The Hessian of ``func`` with respect to the arguments ``argnums``, as ``torch.func.hessian``
    (the Jacobian of its Jacobian)."""
    return jacfwd(jacrev(func, argnums), argnums)


def jvp(func: Callable, primals: Any, tangents: Any, *, strict: bool = False, has_aux: bool = False) -> tuple:
    """``(func(*primals), J @ tangents)``, as ``torch.func.jvp`` (computed in reverse mode by the
    double-vector-product method).

    Raises:
        RuntimeError: primals and tangents that are not tuples of the same length (PyTorch's message).
    """
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple) or len(primals) != len(tangents):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be tuples of the same length")
    if has_aux:
        aux_box: list[Any] = []

        def inner(*xs: Any) -> Any:
            output, aux = _split_aux(func(*xs), True, "jvp")
            aux_box.append(aux)
            return output

        output, tangent = _reverse_jvp(inner, primals, tangents, create_graph=_outer_graph(primals), strict=strict)
        return output, tangent, aux_box[0]
    return _reverse_jvp(func, primals, tangents, create_graph=_outer_graph(primals), strict=strict)


# --- vmap -----------------------------------------------------------------------------------------

_GENERATORS = (default_generator, cuda_default_generator)
_RANDOM_IN_ERROR_MODE = ("vmap: called random operation while in randomness error mode. Please either use the 'same' "
                         "or 'different' randomness flags on vmap or perform the randomness operation out of vmap")


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None) -> Callable:
    """``func`` mapped over a dimension of its inputs, as ``torch.func.vmap``: ``in_dims`` says
    which dimension of each positional argument is mapped (None: not mapped; an int for all, or a
    tuple with an entry per argument), ``out_dims`` where the mapped dimension goes in the outputs.
    Runs ``func`` once per index of the mapped dimension (see the module docstring).

    Raises:
        ValueError: mapped sizes that differ, an in_dim out of range, no mapped tensor, an output
            that is not a tensor, or an unknown ``randomness`` (PyTorch's messages).
        RuntimeError: a random draw inside with ``randomness='error'`` (PyTorch's message).
    """
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    name = getattr(func, "__name__", repr(func))

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        dims = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
                             f"structure of `inputs`. in_dims has structure {len(dims)} but inputs has structure "
                             f"{len(args)}.")
        sizes = []
        for arg, dim in zip(args, dims):
            for t in (tensors_in(arg) if dim is not None else ()):
                if not -t.ndim <= dim < t.ndim:
                    raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={dim} for some "
                                     f"input, but that input is a Tensor of dimensionality {t.ndim} so expected in_dim "
                                     f"to satisfy {-t.ndim} <= in_dim < {t.ndim}.")
                sizes.append(t.shape[dim])
        if not sizes:
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): at least one input must be a Tensor "
                             "mapped along a dimension (in_dims all None)")
        if len(set(sizes)) > 1:
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{sizes} for the mapped dimension")
        start_states = [g.get_state() for g in _GENERATORS] if randomness == "same" else []
        results = [_call_at(func, args, dims, kwargs, i, randomness, start_states) for i in range(sizes[0])]
        return _stacked(results, out_dims, name)

    return wrapper


def _call_at(func: Callable, args: Sequence[Any], dims: Sequence[Any], kwargs: dict, index: int,
             randomness: str, start_states: list) -> Any:
    """``func`` on element ``index`` of the mapped arguments, under ``randomness``: 'same' starts
    every element from the generators' states at the first (``start_states``); 'error' refuses a
    draw (a generator that moved)."""
    sliced = [arg if dim is None else replace_tensors(arg, iter([t.select(dim, index) for t in tensors_in(arg)]))
              for arg, dim in zip(args, dims)]
    if randomness == "same":
        for generator, state in zip(_GENERATORS, start_states):
            generator.set_state(state)
    if randomness != "error":
        return func(*sliced, **kwargs)
    before = [g.numpy().bit_generator.state for g in _GENERATORS]
    result = func(*sliced, **kwargs)
    if any(g.numpy().bit_generator.state != state for g, state in zip(_GENERATORS, before)):
        raise RuntimeError(_RANDOM_IN_ERROR_MODE)
    return result


def _stacked(results: list[Any], out_dims: Any, name: str) -> Any:
    first = results[0]
    outputs = [tensors_in(r) for r in results]
    if not isinstance(first, (Tensor, tuple, list, dict)) or len(outputs[0]) == 0:
        raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(first)}. Did you mean "
                         "to set out_dims= to None for output?")
    dims = out_dims if isinstance(out_dims, (tuple, list)) else (out_dims,) * len(outputs[0])
    stacked = [stack([o[k] for o in outputs], dim=d) for k, d in enumerate(dims)]
    return replace_tensors(first, iter(stacked))
