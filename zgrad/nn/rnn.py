"""Recurrent layers: ``LSTM``, ``GRU`` (stacked, optionally bidirectional) and ``LSTMCell``,
``GRUCell``, as PyTorch's: the same parameter names, gate order, initialization and shapes. On a
``PackedSequence`` they run step by step (:mod:`zgrad.nn.rnn_steps`).

Each layer and direction runs as one op over the whole sequence (:mod:`zgrad.ops.rnn`); this
module checks the arguments, stacks layers and directions, and applies dropout between layers.
Errors name the layer (its repr) and say what PyTorch says.
"""

from __future__ import annotations

import math
from typing import Any

from zgrad import ops
from zgrad.creation import empty, zeros
from zgrad.nn import init
from zgrad.nn.module import Module, Parameter
from zgrad.ops.dropout import dropout as dropout_fn
from zgrad.nn.rnn_steps import run_packed
from zgrad.nn.utils.rnn import PackedSequence
from zgrad.ops.rnn import GRULayer, LSTMLayer

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNNBase", "RNNCellBase"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _check_size(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be greater than zero")


class _Recurrent(Module):
    """What every recurrent module shares: PyTorch's initialization, and the checks of the
    initial states' dtype."""

    hidden_size: int

    def reset_parameters(self) -> None:
        """Draw every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as PyTorch."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def _check_dtype(self, state: Any, which: str, like: Any) -> None:
        """A given state must have the input's (and so the parameters') dtype: PyTorch fails on it
        in the matrix product ("mat1 and mat2 must have the same dtype"); this names the state."""
        if state.dtype != like.dtype:
            raise RuntimeError(f"{self!r}: Expected {which} dtype {like.dtype}, got {state.dtype}")


class RNNBase(_Recurrent):
    """What RNN, LSTM and GRU share (PyTorch's ``nn.RNNBase``, for ``isinstance``): parameters per
    layer and direction, argument checks, stacking. Each subclass names its ``mode``; unlike
    PyTorch's, the base is not constructed with a mode string itself."""

    mode = ""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        _check_size("hidden_size", hidden_size)
        _check_size("num_layers", num_layers)
        _check_size("input_size", input_size)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                             "being zeroed")
        if proj_size:
            raise NotImplementedError(f"{self.mode}: proj_size is not supported by zgrad yet")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        gates = _GATES[self.mode] * hidden_size
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * self.num_directions
            for suffix in ("", "_reverse")[:self.num_directions]:
                shapes = {"weight_ih": (gates, layer_input), "weight_hh": (gates, hidden_size)}
                if bias:
                    shapes.update(bias_ih=(gates,), bias_hh=(gates,))
                for kind, shape in shapes.items():
                    setattr(self, f"{kind}_l{layer}{suffix}", Parameter(empty(*shape, dtype=dtype, device=device)))
        self.reset_parameters()

    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    def _weights(self, layer: int, direction: int) -> tuple[Any, Any, Any, Any]:
        """(weight_ih, weight_hh, bias_ih, bias_hh) of a layer and direction; biases None without bias."""
        suffix = f"_l{layer}{'_reverse' if direction else ''}"
        kinds = ("weight_ih", "weight_hh", "bias_ih", "bias_hh") if self.bias else ("weight_ih", "weight_hh")
        found = tuple(getattr(self, kind + suffix) for kind in kinds)
        return found if self.bias else (*found, None, None)

    def _check_input(self, input: Any) -> Any:  # noqa: A002 - torch's name
        """``input`` as (T, B, I), and whether it was batched."""
        if input.ndim not in (2, 3):
            raise ValueError(f"{self!r}: Expected input to be 2D or 3D, got {input.ndim}D instead")
        self._check_features(input)
        batched = input.ndim == 3
        if not batched:
            return ops.unsqueeze(input, 1), False
        return (ops.transpose(input, 0, 1) if self.batch_first else input), True

    def _check_features(self, input: Any) -> None:  # noqa: A002
        """The last dimension must be ``input_size`` and the dtype the parameters' (PyTorch's texts)."""
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"{self!r}: input.size(-1) must be equal to input_size. "
                               f"Expected {self.input_size}, got {input.shape[-1]}")
        weight = self.weight_ih_l0
        if input.dtype != weight.dtype:
            raise ValueError(f"{self!r}: RNN input dtype ({input.dtype}) does not match weight dtype ({weight.dtype}). "
                             f"Convert input: input.to(zgrad.{weight.dtype}), or convert model: "
                             f"model.to(zgrad.{input.dtype})")

    def _check_state_dims(self, states: tuple[Any, ...], names: str, batched: bool) -> None:
        """Given states must be 3-D for batched input, 2-D for unbatched (PyTorch's texts)."""
        want = 3 if batched else 2
        if all(state is None or state.ndim == want for state in states):
            return
        dims = [f"{state.ndim}-D" for state in states]
        got = f"({', '.join(dims)}) tensors" if len(dims) > 1 else f"{dims[0]} tensor"
        kind = "batched 3-D" if batched else "unbatched 2-D"
        raise RuntimeError(f"{self!r}: For {kind} input, {names} should also be {want}-D but got {got}")

    def _initial_state(self, state: Any, batch: int, batched: bool, which: str, like: Any) -> Any:
        """A (layers * directions, B, H) initial state: zeros, or ``state`` (its rank already
        checked) checked against it."""
        expected = (self.num_layers * self.num_directions, batch, self.hidden_size)
        if state is None:
            return zeros(*expected, dtype=like.dtype, device=like.device)
        if not batched:
            state = ops.unsqueeze(state, 1)
        if tuple(state.shape) != expected:
            raise RuntimeError(f"{self!r}: Expected {which} size {expected}, got {list(state.shape)}")
        self._check_dtype(state, which, like)
        return state

    def _run(self, x: Any, states: tuple[Any, ...]) -> tuple[Any, list[list[Any]]]:
        """The last layer's output (T, B, directions * H) and each layer-direction's final states."""
        finals: list[list[Any]] = [[] for _ in states]
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self.num_directions):
                index = layer * self.num_directions + direction
                initial = [state[index] for state in states]
                output, *last = self._layer(x, initial, self._weights(layer, direction), direction == 1)
                outputs.append(output)
                for final, value in zip(finals, last):
                    final.append(value)
            x = outputs[0] if len(outputs) == 1 else ops.cat(outputs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = dropout_fn(x, self.dropout, True)
        return x, finals

    def _finish(self, output: Any, finals: list[list[Any]], batched: bool) -> tuple[Any, list[Any]]:
        states = [ops.stack(final, 0) for final in finals]
        if not batched:
            return ops.squeeze(output, 1), [ops.squeeze(s, 1) for s in states]
        return (ops.transpose(output, 0, 1) if self.batch_first else output), states

    def flatten_parameters(self) -> None:
        """Nothing to do: PyTorch compacts the weights for cuDNN here; zgrad's kernels read them as they are."""

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        for name, default in (("bias", True), ("batch_first", False), ("dropout", 0.0), ("bidirectional", False)):
            if getattr(self, name) != default:
                text += f", {name}={getattr(self, name)}"
        return text


class LSTM(RNNBase):
    """A multi-layer LSTM: ``forward(input, (h_0, c_0)=None) -> (output, (h_n, c_n))``.

    ``input`` is (T, B, input_size) ((B, T, input_size) with ``batch_first``) or unbatched
    (T, input_size); states are (num_layers * num_directions, B, hidden_size) (without B when
    unbatched) and default to zeros. Gates i, f, g, o; parameters ``weight_ih_l{k}``,
    ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}`` (``_reverse`` for the backward direction),
    all drawn from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)). ``dropout`` applies to the
    outputs of every layer but the last, in training mode.

    Raises:
        ValueError: an input that is not 2-D or 3-D, or not of the parameters' dtype.
        RuntimeError: a feature size, or a state's rank, shape or dtype, that does not match; every
            error names the layer.
        NotImplementedError: ``proj_size`` != 0.
    """

    mode, num_states = "LSTM", 2

    def _layer(self, x: Any, initial: list[Any], weights: tuple[Any, ...], reverse: bool) -> tuple[Any, ...]:
        return LSTMLayer.apply(x, *initial, *weights, reverse)

    def _step(self, x: Any, states: list[Any], weights: tuple[Any, ...]) -> list[Any]:
        _, h, c = LSTMLayer.apply(ops.unsqueeze(x, 0), *states, *weights, False)
        return [h, c]

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, tuple[Any, Any]]:  # noqa: A002
        if isinstance(input, PackedSequence):
            return run_packed(self, input, hx)
        x, batched = self._check_input(input)
        batch = x.shape[1]
        h0, c0 = (None, None) if hx is None else hx
        if hx is not None:
            self._check_state_dims((h0, c0), "hx and cx", batched)
        h0 = self._initial_state(h0, batch, batched, "hidden[0]", x)
        c0 = self._initial_state(c0, batch, batched, "hidden[1]", x)
        output, finals = self._run(x, (h0, c0))
        output, (h_n, c_n) = self._finish(output, finals, batched)
        return output, (h_n, c_n)


class GRU(RNNBase):
    """A multi-layer GRU: ``forward(input, h_0=None) -> (output, h_n)``.

    As :class:`LSTM`, with gates r, z, n (n = tanh(W_in x + b_in + r * (W_hn h + b_hn))) and one
    state.
    """

    mode, num_states = "GRU", 1

    def _layer(self, x: Any, initial: list[Any], weights: tuple[Any, ...], reverse: bool) -> tuple[Any, ...]:
        return GRULayer.apply(x, *initial, *weights, reverse)

    def _step(self, x: Any, states: list[Any], weights: tuple[Any, ...]) -> list[Any]:
        return [GRULayer.apply(ops.unsqueeze(x, 0), *states, *weights, False)[1]]

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:  # noqa: A002
        if isinstance(input, PackedSequence):
            return run_packed(self, input, hx)
        x, batched = self._check_input(input)
        self._check_state_dims((hx,), "hx", batched)
        h0 = self._initial_state(hx, x.shape[1], batched, "hidden", x)
        output, finals = self._run(x, (h0,))
        output, (h_n,) = self._finish(output, finals, batched)
        return output, h_n


class RNNCellBase(_Recurrent):
    """What RNNCell, LSTMCell and GRUCell share (PyTorch's ``nn.RNNCellBase``): one time step of the
    layer op, on (B, I) or (I,) input."""

    mode = ""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        _check_size("input_size", input_size)
        _check_size("hidden_size", hidden_size)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gates = _GATES[self.mode] * hidden_size
        self.weight_ih = Parameter(empty(gates, input_size, dtype=dtype, device=device))
        self.weight_hh = Parameter(empty(gates, hidden_size, dtype=dtype, device=device))
        self.bias_ih = Parameter(empty(gates, dtype=dtype, device=device)) if bias else None
        self.bias_hh = Parameter(empty(gates, dtype=dtype, device=device)) if bias else None
        self.reset_parameters()

    def _check_input(self, input: Any) -> tuple[Any, bool]:  # noqa: A002
        """``input`` as (1, B, I) (one time step), and whether it was batched."""
        if input.ndim not in (1, 2):
            raise ValueError(f"{self!r}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"{self!r}: input has inconsistent input_size: got {input.shape[-1]} "
                               f"expected {self.input_size}")
        if input.dtype != self.weight_ih.dtype:
            raise RuntimeError(f"{self!r}: input must have the type {self.weight_ih.dtype}, got type {input.dtype}")
        batched = input.ndim == 2
        return ops.reshape(input, (1, input.shape[0] if batched else 1, self.input_size)), batched

    def _state(self, state: Any, batch: int, batched: bool, which: str, index: int, like: Any) -> Any:
        """A (B, H) state: zeros, or ``state`` checked with PyTorch's texts (``which`` is its
        argument's name, hx[0] or hidden; PyTorch's kernel calls it hidden0, hidden1)."""
        if state is None:
            return zeros(batch, self.hidden_size, dtype=like.dtype, device=like.device)
        if state.ndim not in (1, 2):
            raise ValueError(f"{self!r}: Expected {which} to be 1D or 2D, got {state.ndim}D instead")
        if state.ndim != (2 if batched else 1):
            raise RuntimeError(f"{self!r}: Expected {which} to be {2 if batched else 1}D for "
                               f"{'batched 2-D' if batched else 'unbatched 1-D'} input, got {state.ndim}D")
        state = state if batched else ops.unsqueeze(state, 0)
        if state.shape[0] != batch:
            raise RuntimeError(f"{self!r}: Input batch size {batch} doesn't match hidden{index} batch size "
                               f"{state.shape[0]}")
        if state.shape[1] != self.hidden_size:
            raise RuntimeError(f"{self!r}: hidden{index} has inconsistent hidden_size: got {state.shape[1]}, "
                               f"expected {self.hidden_size}")
        self._check_dtype(state, f"hidden{index}", like)
        return state

    def _unbatch(self, state: Any, batched: bool) -> Any:
        return state if batched else ops.squeeze(state, 0)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class LSTMCell(RNNCellBase):
    """One LSTM step: ``forward(input, (h, c)=None) -> (h', c')`` on (B, input_size) or
    (input_size,) input; parameters ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``."""

    mode = "LSTM"

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:  # noqa: A002
        x, batched = self._check_input(input)
        batch = x.shape[1]
        h, c = (None, None) if hx is None else hx
        h = self._state(h, batch, batched, "hx[0]", 0, x)
        c = self._state(c, batch, batched, "hx[1]", 1, x)
        _, h_next, c_next = LSTMLayer.apply(x, h, c, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh,
                                            False)
        return self._unbatch(h_next, batched), self._unbatch(c_next, batched)


class GRUCell(RNNCellBase):
    """One GRU step: ``forward(input, h=None) -> h'``."""

    mode = "GRU"

    def forward(self, input: Any, hx: Any = None) -> Any:  # noqa: A002
        x, batched = self._check_input(input)
        h = self._state(hx, x.shape[1], batched, "hidden", 0, x)
        _, h_next = GRULayer.apply(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh, False)
        return self._unbatch(h_next, batched)
