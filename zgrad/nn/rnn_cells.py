"""One time step of the recurrent layers as functions, PyTorch's ``torch.lstm_cell``,
``torch.gru_cell``, ``torch.rnn_tanh_cell`` and ``torch.rnn_relu_cell``: input (B, I), states
(B, H), weights W_ih (G*H, I) and W_hh (G*H, H), optional biases (G*H,), gates in PyTorch's order.

The LSTM and GRU steps run the layer ops of :mod:`zgrad.ops.rnn` over a sequence of one step, so a
cell and a layer compute alike; the Elman steps are two ``linear`` products and the activation.
"""

from __future__ import annotations

from typing import Any, Sequence

from zgrad import ops
from zgrad.creation import zeros_like
from zgrad.ops.rnn import GRULayer, LSTMLayer

__all__ = ["gru_cell", "lstm_cell", "rnn_relu_cell", "rnn_tanh_cell"]


def _biases(b_ih: Any, b_hh: Any) -> tuple[Any, Any]:
    """Both biases or neither: the missing one of a pair as zeros."""
    if (b_ih is None) == (b_hh is None):
        return b_ih, b_hh
    given = b_ih if b_hh is None else b_hh
    zeros = zeros_like(given)
    return (given, zeros) if b_hh is None else (zeros, given)


def _one_step(input: Any) -> Any:  # noqa: A002
    return ops.unsqueeze(input, 0)


def lstm_cell(input: Any, hx: Sequence[Any], w_ih: Any, w_hh: Any, b_ih: Any = None,  # noqa: A002
              b_hh: Any = None) -> tuple[Any, Any]:
    """One LSTM step: ``(h', c')`` from ``input`` and ``hx = (h, c)``.

    Raises:
        RuntimeError: ``hx`` that is not two states (PyTorch's message).
    """
    if len(hx) != 2:
        raise RuntimeError("lstm_cell expects two hidden states")
    _, h_next, c_next = LSTMLayer.apply(_one_step(input), hx[0], hx[1], w_ih, w_hh, *_biases(b_ih, b_hh), False)
    return h_next, c_next


def gru_cell(input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None) -> Any:  # noqa: A002
    """One GRU step: ``h'`` from ``input`` and ``hx``."""
    _, h_next = GRULayer.apply(_one_step(input), hx, w_ih, w_hh, *_biases(b_ih, b_hh), False)
    return h_next


def _elman_pre_activation(input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any, b_hh: Any) -> Any:  # noqa: A002
    return ops.linear(input, w_ih, b_ih) + ops.linear(hx, w_hh, b_hh)


def rnn_tanh_cell(input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None) -> Any:  # noqa: A002
    """One Elman step: tanh(input W_ih^T + b_ih + hx W_hh^T + b_hh)."""
    return ops.tanh(_elman_pre_activation(input, hx, w_ih, w_hh, b_ih, b_hh))


def rnn_relu_cell(input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None) -> Any:  # noqa: A002
    """One Elman step: relu(input W_ih^T + b_ih + hx W_hh^T + b_hh)."""
    return ops.relu(_elman_pre_activation(input, hx, w_ih, w_hh, b_ih, b_hh))
