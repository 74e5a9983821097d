"""Recurrent layers run one time step at a time: the Elman ``RNN`` always, and ``LSTM`` / ``GRU``
on a :class:`~zgrad.nn.utils.rnn.PackedSequence`.

Each module supplies ``_step(x_t, states, weights) -> states`` (one step of one layer and
direction on the rows still running); :func:`run_steps` stacks layers and directions over steps
whose batch shrinks as sequences end (packed input is sorted longest first, so the rows that end
are the last ones): a finished row's state is its final state, and a reverse direction takes up
a row's initial state at the row's last step.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from zgrad import ops
from zgrad.nn.utils.rnn import PackedSequence
from zgrad.ops.dropout import dropout as dropout_fn

__all__ = ["run_packed", "run_steps"]

Step = Callable[[Any, list[Any], tuple[Any, ...]], list[Any]]


def _forward_direction(step: Step, xs: Sequence[Any], sizes: Sequence[int], initial: list[Any],
                       weights: tuple[Any, ...]) -> tuple[list[Any], list[Any]]:
    states, ended = initial, []
    outputs = []
    for x_t, n in zip(xs, sizes):
        if n < states[0].shape[0]:
            ended.append([s[n:] for s in states])
            states = [s[:n] for s in states]
        states = step(x_t, states, weights)
        outputs.append(states[0])
    finals = [ops.cat([s, *(piece[k] for piece in reversed(ended))], 0) if ended else s for k, s in enumerate(states)]
    return outputs, finals


def _reverse_direction(step: Step, xs: Sequence[Any], sizes: Sequence[int], initial: list[Any],
                       weights: tuple[Any, ...]) -> tuple[list[Any], list[Any]]:
    last = sizes[-1]
    states = initial if last == initial[0].shape[0] else [s[:last] for s in initial]
    outputs: list[Any] = [None] * len(xs)
    for t in reversed(range(len(xs))):
        have = states[0].shape[0]
        if sizes[t] > have:
            states = [ops.cat([s, init[have:sizes[t]]], 0) for s, init in zip(states, initial)]
        states = step(xs[t], states, weights)
        outputs[t] = states[0]
    return outputs, states


def run_steps(module: Any, xs: Sequence[Any], sizes: Sequence[int], initial: Sequence[Any]
              ) -> tuple[list[Any], list[Any]]:
    """Every layer and direction of ``module`` over the steps ``xs`` (step t: (sizes[t], features)).

    Args:
        initial: each kind of state (h, or h and c), (layers * directions, B, H).

    Returns:
        (the last layer's output of each step, (sizes[t], directions * H); each kind of final
        state, (layers * directions, B, H)).
    """
    finals: list[list[Any]] = [[] for _ in initial]
    for layer in range(module.num_layers):
        per_direction = []
        for direction in range(module.num_directions):
            index = layer * module.num_directions + direction
            run = _reverse_direction if direction else _forward_direction
            outputs, last = run(module._step, xs, sizes, [state[index] for state in initial],
                                module._weights(layer, direction))
            per_direction.append(outputs)
            for final, value in zip(finals, last):
                final.append(value)
        xs = per_direction[0] if len(per_direction) == 1 else [ops.cat(list(o), 1) for o in zip(*per_direction)]
        if module.dropout and module.training and layer < module.num_layers - 1:
            xs = list(ops.split(dropout_fn(ops.cat(list(xs), 0), module.dropout, True), list(sizes), 0))
    return list(xs), [ops.stack(final, 0) for final in finals]


def run_packed(module: Any, packed: PackedSequence, hx: Any) -> tuple[PackedSequence, Any]:
    """``module`` (RNN, LSTM or GRU) on a packed batch: (packed output, final states in the
    batch's original order: h_n, or (h_n, c_n) for an LSTM)."""
    data = packed.data
    module._check_features(data)
    sizes = [int(n) for n in packed.batch_sizes.tolist()]
    batch = sizes[0] if sizes else 0
    given = (hx if isinstance(hx, (tuple, list)) else (hx,)) if hx is not None else (None,) * module.num_states
    states = []
    for which, state in enumerate(given):
        if state is not None and packed.sorted_indices is not None:
            state = ops.index_select(state, 1, packed.sorted_indices)
        states.append(module._initial_state(state, batch, True, f"hidden[{which}]" if module.num_states > 1
                                            else "hidden", data))
    outputs, finals = run_steps(module, ops.split(data, sizes, 0), sizes, states)
    if packed.unsorted_indices is not None:
        finals = [ops.index_select(f, 1, packed.unsorted_indices) for f in finals]
    output = PackedSequence(ops.cat(outputs, 0), packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
    return output, (tuple(finals) if module.num_states > 1 else finals[0])
