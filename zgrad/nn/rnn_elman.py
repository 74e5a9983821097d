"""The Elman recurrent layers ``RNN`` and ``RNNCell``, as PyTorch's:
h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh), act tanh or relu, with PyTorch's parameter names,
initialization and shapes. ``RNN`` runs step by step (:func:`zgrad.nn.rnn_steps.run_steps`).
"""

from __future__ import annotations

from typing import Any

from zgrad import ops
from zgrad.nn.rnn import RNNCellBase, RNNBase
from zgrad.nn.rnn_cells import rnn_relu_cell, rnn_tanh_cell
from zgrad.nn.rnn_steps import run_packed, run_steps
from zgrad.nn.utils.rnn import PackedSequence

__all__ = ["RNN", "RNNCell"]

NONLINEARITIES = ("tanh", "relu")


def _elman_step(x: Any, h: Any, w_ih: Any, w_hh: Any, b_ih: Any, b_hh: Any, nonlinearity: str) -> Any:
    step = rnn_tanh_cell if nonlinearity == "tanh" else rnn_relu_cell
    return step(x, h, w_ih, w_hh, b_ih, b_hh)


class RNN(RNNBase):
    """A multi-layer Elman RNN: ``forward(input, h_0=None) -> (output, h_n)``.

    Arguments, shapes and parameters as :class:`zgrad.nn.LSTM` (one gate: ``weight_ih_l{k}`` is
    (hidden_size, input size)), plus ``nonlinearity`` ('tanh' or 'relu'). ``input`` may be a
    :class:`~zgrad.nn.utils.rnn.PackedSequence`, and then so is ``output``.

    Raises:
        ValueError: an unknown ``nonlinearity``; otherwise as :class:`zgrad.nn.LSTM`.
    """

    mode, num_states = "RNN", 1

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in NONLINEARITIES:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0, device,
                         dtype)
        self.nonlinearity = nonlinearity

    def _step(self, x: Any, states: list[Any], weights: tuple[Any, ...]) -> list[Any]:
        return [_elman_step(x, states[0], *weights, self.nonlinearity)]

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:  # noqa: A002
        if isinstance(input, PackedSequence):
            return run_packed(self, input, hx)
        x, batched = self._check_input(input)
        self._check_state_dims((hx,), "hx", batched)
        steps, batch = x.shape[0], x.shape[1]
        h0 = self._initial_state(hx, batch, batched, "hidden", x)
        # split (whose gradient is one concatenation), not x[t] (a full-size gradient per step)
        xs = [ops.squeeze(piece, 0) for piece in ops.split(x, 1, 0)] if steps else []
        outputs, (h_n,) = run_steps(self, xs, [batch] * steps, [h0])
        output = ops.stack(outputs, 0)
        if not batched:
            return ops.squeeze(output, 1), ops.squeeze(h_n, 1)
        return (ops.transpose(output, 0, 1) if self.batch_first else output), h_n


class RNNCell(RNNCellBase):
    """One Elman RNN step: ``forward(input, h=None) -> h'`` on (B, input_size) or (input_size,)
    input; parameters ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``.

    Raises:
        ValueError: an unknown ``nonlinearity``.
    """

    mode = "RNN"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in NONLINEARITIES:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Any, hx: Any = None) -> Any:  # noqa: A002
        x, batched = self._check_input(input)
        h = self._state(hx, x.shape[1], batched, "hx", 0, x)
        h_next = _elman_step(x[0], h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh, self.nonlinearity)
        return self._unbatch(h_next, batched)

    def extra_repr(self) -> str:
        return super().extra_repr() + ("" if self.nonlinearity == "tanh" else f", nonlinearity={self.nonlinearity}")
