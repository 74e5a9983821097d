"""Activation checkpointing, as ``torch.utils.checkpoint``: run a part of a model without keeping
its activations for backward, and run it again during backward to get them back.

Both of PyTorch's variants are here, on one backward node per call (:class:`CheckpointFunction`):

- ``use_reentrant=False`` (PyTorch's recommended one): the forward runs with grad mode on, over
  detached copies of the inputs, only to learn which tensors the part reaches (the inputs that
  require grad, every leaf it uses, such as a module's parameters, and the tensors from before the
  call that it closes over); its graph and the
  activations it saved are dropped before ``checkpoint`` returns. The node's gradients go to those
  tensors, so ``zgrad.autograd.grad`` and ``backward(inputs=...)`` see the parameters' gradients
  as they would without checkpointing. Its backward runs the part again and differentiates it in a
  nested pass that stops at those tensors, raw (:meth:`GraphTask.stop_at`): their hooks run once,
  in the enclosing pass, as they would without checkpointing.
- ``use_reentrant=True``: the forward runs under ``no_grad``; the node's gradients go to the
  tensor inputs only, and its backward accumulates the parameters' gradients into their ``.grad``
  itself (a nested ``backward``), which is why PyTorch refuses it under ``autograd.grad``.

The random generators' states (``preserve_rng_state``) and the autocast settings of the forward
are restored for the second run, so dropout draws the same mask.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable

import numpy as np

from zgrad.amp.autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from zgrad.autograd.function import Function
from zgrad.autograd.gradients import backward as accumulate_backward
from zgrad.autograd.graph_gradients import TENSOR_GRADIENTS
from zgrad.engine.autocast_state import DEVICE_TYPES
from zgrad.engine.grad_mode import enable_grad, is_grad_enabled, no_grad
from zgrad.engine.graph import AccumulateGrad, Edge, Node
from zgrad.engine.graph_task import current_graph_task, run_backward
from zgrad.errors import AutogradError
from zgrad.random import cuda_default_generator, default_generator
from zgrad.tensor import Tensor, gradient_edge
from zgrad.utils.tensor_tree import replace_tensors, tensors_in

__all__ = ["checkpoint", "checkpoint_sequential", "noop_context_fn", "CheckpointError"]

_REENTRANT_UNDER_GRAD = ("When use_reentrant=True, zgrad.utils.checkpoint is incompatible with .grad() or passing "
                         "an `inputs` parameter to .backward(). To resolve this error, you can either set "
                         "use_reentrant=False, or call .backward() without passing the `inputs` argument.")


class CheckpointError(RuntimeError):
    """The second run of a checkpointed function differs from its first (PyTorch's class)."""


def noop_context_fn() -> tuple[contextlib.AbstractContextManager, contextlib.AbstractContextManager]:
    """The default ``context_fn``: no context around either run."""
    return contextlib.nullcontext(), contextlib.nullcontext()


class _Replay:
    """What the second run needs to start as the first did: the function, its non-tensor
    arguments in place, the random generators' states and the autocast settings."""

    def __init__(self, function: Callable, args: tuple, kwargs: dict, preserve_rng_state: bool) -> None:
        self.function, self.args, self.kwargs = function, args, kwargs
        self.rng_states = ([(g, g.get_state()) for g in (default_generator, cuda_default_generator)]
                           if preserve_rng_state else [])
        self.autocast = [(device, get_autocast_dtype(device)) for device in DEVICE_TYPES
                         if is_autocast_enabled(device)]

    def call(self, tensors: list[Tensor]) -> Any:
        """Call the function on ``tensors`` in place of its tensor arguments, with grad mode on."""
        args, kwargs = replace_tensors((self.args, self.kwargs), iter(tensors))
        with enable_grad():
            return self.function(*args, **kwargs)

    def call_again(self, tensors: list[Tensor], context: contextlib.AbstractContextManager) -> Any:
        """:meth:`call` from the first run's random states and autocast settings, inside
        ``context``; the caller's random streams are left as they were."""
        with contextlib.ExitStack() as stack:
            if self.rng_states:
                stack.enter_context(_forked_rng(self.rng_states))
            for device, dtype in self.autocast:
                stack.enter_context(autocast(device, dtype=dtype))
            stack.enter_context(context)
            return self.call(tensors)


@contextlib.contextmanager
def _forked_rng(states: list) -> Any:
    """The generators set to ``states`` inside the block, and back to their own states after it."""
    own = [(g, g.get_state()) for g, _ in states]
    for generator, state in states:
        generator.set_state(state)
    try:
        yield
    finally:
        for generator, state in own:
            generator.set_state(state)


def _detached(tensors: list[Tensor]) -> list[Tensor]:
    """Leaf copies (same memory) of ``tensors``, requiring grad where they do."""
    return [t.detach().requires_grad_(t.requires_grad) for t in tensors]


def _release(copies: list[Tensor]) -> None:
    """Break the cycle between each of the :func:`_detached` ``copies`` and its gradient sink, so that
    a copy goes as soon as it is unused: while it lives, its memory counts as a leaf's, and the
    original (an activation, say) could not be changed in place."""
    for copy in copies:
        copy._accumulator = None


def _leaves_reached(outputs: list[Tensor], since: int) -> tuple[list[Tensor], list[Tensor]]:
    """What the graph of ``outputs`` (made by nodes numbered ``since`` or later) leads to outside
    it: the leaf tensors it reaches, and stand-ins for the non-leaf tensors made before the call
    that it reaches (the function closes over them), each in the order first met. A stand-in is a
    tensor on the same graph edge as the tensor it stands for: gradients sent to it go on there."""
    leaves: dict[int, Tensor] = {}
    outer: dict[tuple[int, int], Tensor] = {}
    seen: set[int] = set()
    stack: list[Node] = []

    def meet(node: Node, input_nr: int) -> None:
        if isinstance(node, AccumulateGrad):
            leaves.setdefault(id(node.variable), node.variable)
        elif node.sequence_nr < since:
            if (id(node), input_nr) not in outer:
                outer[(id(node), input_nr)] = _stand_in(node, input_nr)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append(node)

    for output in outputs:
        meet(*gradient_edge(output))
    while stack:
        for edge in stack.pop().next_edges:
            if edge is not None:
                meet(*edge)
    return list(leaves.values()), list(outer.values())


def _stand_in(node: Node, input_nr: int) -> Tensor:
    """A tensor at input ``input_nr`` of ``node``, with that input's shape and dtype (its values
    are never read: broadcast zeros on the CPU)."""
    meta = node.input_metadata[input_nr]
    data = np.broadcast_to(np.zeros((), meta.dtype), meta.shape) if meta.device_type == "cpu" else meta.zeros()
    return Tensor(data, True, _grad_fn=node, _output_nr=input_nr)


def _sequence_mark() -> int:
    """A number no earlier node has: nodes made from now on have it or larger."""
    return Node().sequence_nr


class CheckpointFunction(Function):
    """The backward node of one checkpointed call: its inputs are the tensors the call's gradient
    goes to, its outputs the call's output tensors, detached from the dropped first-run graph."""

    @staticmethod
    def forward(ctx: Any, call: "_Call", *targets: Tensor) -> tuple[Tensor, ...]:
        ctx.call = call
        ctx.save_for_backward(*call.saved)
        return tuple(call.outputs[i].detach() for i in call.linked)

    @staticmethod
    def backward(ctx: Any, *output_grads: Tensor) -> tuple[Any, ...]:
        call: _Call = ctx.call
        saved = ctx.saved_tensors  # checks that no saved input was changed in place since
        return (None, *call.differentiate(list(saved), list(output_grads)))


class _Call:
    """One checkpointed call: the replay, the outputs the first run gave, and where the gradient goes."""

    def __init__(self, replay: _Replay, inputs: list[Tensor], reentrant: bool, determinism_check: str,
                 recompute_context: contextlib.AbstractContextManager) -> None:
        self.replay, self.inputs, self.reentrant = replay, inputs, reentrant
        self.determinism_check = determinism_check
        self.recompute_context = recompute_context
        self.saved: list[Tensor] = inputs
        self.outputs: list[Tensor] = []  # every tensor the first run returned
        self.linked: list[int] = []  # which of them carry the checkpoint's backward
        self.leaves: list[Tensor] = []  # non-reentrant: leaves the function reaches that are not its inputs
        self.outer: list[Tensor] = []  # non-reentrant: stand-ins of non-leaf tensors from before the call it uses

    def differentiate(self, saved: list[Tensor], output_grads: list[Tensor]) -> list[Any]:
        """Run the function again and return the gradients for the node's inputs."""
        if self.reentrant:
            task = current_graph_task()
            if task is not None and task.restricted:
                raise AutogradError(_REENTRANT_UNDER_GRAD)
        create_graph = is_grad_enabled()  # the engine records this backward (double backward)
        # Recorded, the second run starts from the saved inputs themselves, so that the gradients'
        # graphs reach them; otherwise from detached copies, so that the pass ends there.
        inputs = saved if create_graph and not self.reentrant else _detached(saved)
        outputs = tensors_in(self.replay.call_again(inputs, self.recompute_context))
        self._check_same(outputs)
        pairs = [(o, g) for o, g in zip((outputs[i] for i in self.linked), output_grads) if o.requires_grad]
        try:
            if self.reentrant:
                if not pairs:
                    raise AutogradError("none of output has requires_grad=True, this checkpoint() is not necessary")
                accumulate_backward([o for o, _ in pairs], [g for _, g in pairs])
                return [t.grad if t.requires_grad else None for t in inputs]
            wanted = [gradient_edge(t) for t in inputs if t.requires_grad] + \
                [gradient_edge(t) for t in self.leaves + self.outer]
            found = iter(self._gradients_at(pairs, wanted, create_graph) if pairs else [None] * len(wanted))
            results = [next(found) if t.requires_grad else None for t in inputs]
            return results + list(found)
        finally:
            if inputs is not saved:
                _release(inputs)

    @staticmethod
    def _gradients_at(pairs: list[tuple[Tensor, Tensor]], wanted: list[Edge], create_graph: bool) -> list[Any]:
        """The gradients of the second run's outputs (``pairs`` of output and gradient) that reach
        each ``wanted`` edge, raw: the pass stops at those edges' nodes and runs none of their
        hooks, which the enclosing pass runs once when it gets there itself (None: no gradient)."""
        roots = [gradient_edge(o) for o, _ in pairs]
        boundaries = {edge.node for edge in wanted}
        if create_graph:
            with enable_grad():
                task = run_backward(roots, [g for _, g in pairs], retain_graph=True, graph_gradients=TENSOR_GRADIENTS,
                                    boundaries=boundaries)
        else:
            task = run_backward(roots, [g._data for _, g in pairs], boundaries=boundaries)
        found = (task.captured.get((edge.node, edge.input_nr)) for edge in wanted)
        return [g if g is None or isinstance(g, Tensor) else Tensor(g) for g in found]

    def _check_same(self, outputs: list[Tensor]) -> None:
        """Raises CheckpointError if the second run's outputs differ from the first's in number,
        shape, dtype or device (``determinism_check="default"``)."""
        if self.determinism_check == "none":
            return
        first = [(tuple(o.shape), o.dtype, o.device) for o in self.outputs]
        second = [(tuple(o.shape), o.dtype, o.device) for o in outputs]
        if first != second:
            raise CheckpointError(
                "zgrad.utils.checkpoint: Recomputed values have different metadata than during the original forward "
                f"pass.\nfirst run's outputs (shape, dtype, device): {first}\nsecond run's: {second}\nThe function "
                "must compute the same thing when run again: do not branch on state it changes, or on random draws "
                "when preserve_rng_state=False")


def checkpoint(function: Callable, *args: Any, use_reentrant: bool | None = None,
               context_fn: Callable[[], tuple] = noop_context_fn, determinism_check: str = "default",
               debug: bool = False, early_stop: bool = True, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` without keeping its activations: backward runs it again (as
    ``torch.utils.checkpoint.checkpoint``).

    Args:
        function: what to run; it must compute the same thing when run again.
        use_reentrant: which variant (see the module docstring); pass it explicitly. None warns, as
            PyTorch does, and means True.
        preserve_rng_state: (keyword, default True) run the second time from the first run's random
            states, so random ops such as dropout draw the same values.
        context_fn: ``use_reentrant=False`` only: returns two context managers, entered around the
            first run and the second.
        determinism_check: ``"default"`` compares the two runs' outputs (number, shape, dtype,
            device) and raises :class:`CheckpointError` when they differ; ``"none"`` does not.
        debug: ``use_reentrant=False`` only; accepted for PyTorch's signature (zgrad's error
            already lists both runs' outputs).
        early_stop: accepted for PyTorch's signature: the second run is always the whole function.
        kwargs: keyword arguments of ``function`` (``use_reentrant=False`` only).

    Returns:
        What ``function`` returns; its tensors carry the checkpoint's backward.

    Raises:
        ValueError: keyword arguments, ``context_fn`` or ``debug`` with ``use_reentrant=True``, or
            an unknown ``determinism_check`` (PyTorch's messages).
    """
    if use_reentrant is None:
        warnings.warn(
            "zgrad.utils.checkpoint: the use_reentrant parameter should be passed explicitly. use_reentrant=False is "
            "recommended, but if you need to preserve the current default behavior, you can pass use_reentrant=True. "
            "Refer to docs for more details on the differences between the two variants.", UserWarning, stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if use_reentrant and (context_fn is not noop_context_fn or debug is not False):
        raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
    forward_context, recompute_context = context_fn()
    if not is_grad_enabled():
        with forward_context:
            return function(*args, **kwargs)
    replay = _Replay(function, args, kwargs, preserve)
    inputs = tensors_in((args, kwargs))
    call = _Call(replay, inputs, use_reentrant, determinism_check, recompute_context)
    if use_reentrant:
        if not any(t.requires_grad for t in inputs):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", UserWarning,
                          stacklevel=2)
        with no_grad():
            result = function(*args, **kwargs)
        call.outputs = tensors_in(result)
        call.linked = [i for i, t in enumerate(call.outputs) if t.is_floating_point() or t.is_complex()]
        targets = inputs
    else:
        since = _sequence_mark()
        first = _detached(inputs)
        with forward_context:
            result = replay.call(first)
        call.outputs = tensors_in(result)
        call.linked = [i for i, t in enumerate(call.outputs) if t.requires_grad]
        own = {id(t) for t in first}
        reached, call.outer = _leaves_reached([call.outputs[i] for i in call.linked], since)
        call.leaves = [t for t in reached if id(t) not in own]
        call.outputs = [t.detach() if t.requires_grad else t for t in call.outputs]  # the first run's graph goes
        _release(first)
        targets = inputs + call.leaves + call.outer
    if not call.linked or not any(t.requires_grad for t in targets):
        return replace_tensors(result, iter(call.outputs))
    attached = CheckpointFunction.apply(call, *targets)
    linked = dict(zip(call.linked, (attached,) if isinstance(attached, Tensor) else attached))
    return replace_tensors(result, iter([linked.get(i, t) for i, t in enumerate(call.outputs)]))


def checkpoint_sequential(functions: Any, segments: int, input: Tensor,  # noqa: A002 - PyTorch's name
                          use_reentrant: bool | None = None, **kwargs: Any) -> Any:
    """Run ``functions`` (a list of modules or functions, or an ``nn.Sequential``) one after
    another on ``input``, checkpointing all but the last of ``segments`` runs of them (as
    ``torch.utils.checkpoint.checkpoint_sequential``).

    Raises:
        ValueError: a keyword argument other than ``preserve_rng_state`` (PyTorch's message).
    """
    if use_reentrant is None:
        warnings.warn(
            "zgrad.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed explicitly. "
            "use_reentrant=False is recommended, but if you need to preserve the current default behavior, you can "
            "pass use_reentrant=True. Refer to docs for more details on the differences between the two variants.",
            UserWarning, stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())

    def run(start: int, end: int) -> Callable[[Any], Any]:
        def forward(value: Any) -> Any:
            for f in functions[start:end]:
                value = f(value)
            return value
        return forward

    size = len(functions) // segments
    end = 0
    for start in range(0, size * (segments - 1), size):
        end = start + size
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run(end, len(functions))(input)
