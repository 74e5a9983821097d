"""The CUDA backend's LSTM and GRU layers: the time loop of :mod:`zgrad.kernels.cpu.sequence` with
the recurrent product on the tiled matmul kernel and each step's gates in one launch of
:mod:`kernels.rnn`. Part of :mod:`zgrad.kernels.cuda.backend`.
"""

from __future__ import annotations

from typing import Any

from zgrad.kernels.cuda import kernels
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.array import DeviceArray
from zgrad.kernels.cuda.elementwise import binary_op, unary_op
from zgrad.kernels.cuda.reduce import contiguous, matmul

__all__ = ["lstm_forward", "lstm_backward", "gru_forward", "gru_backward"]


def _steps(steps: int, reverse: bool) -> range:
    return range(steps - 1, -1, -1) if reverse else range(steps)


def _slots(t: int, reverse: bool) -> tuple[int, int]:
    """(slot of the previous state, slot of this step's state) in the (T + 1)-long state arrays."""
    return (t + 1, t) if reverse else (t, t + 1)


def _cell(kernel: Any, count: int, *args: Any) -> None:
    if count:
        rt.launch(kernel, rt.grid_1d(count), *(a.arg() for a in args))


def lstm_forward(gates_x, w_hh, bias, h0, c0, reverse: bool, hs, cs, acts):
    """Run an LSTM over time: ``gates_x`` (T, B, 4H) = x @ W_ih.T, ``bias`` = b_ih + b_hh; fills
    ``hs``/``cs`` (T + 1, B, H) and the gate activations ``acts`` (T, B, 4H)."""
    rnn = kernels.rnn
    steps = gates_x.shape[0]
    first = steps if reverse else 0
    unary_op("copy", h0, hs[first])
    unary_op("copy", c0, cs[first])
    gates_x = contiguous(gates_x)
    gates_h = DeviceArray.empty((h0.shape[0], w_hh.shape[0]), w_hh.dtype)
    for t in _steps(steps, reverse):
        prev, cur = _slots(t, reverse)
        matmul(hs[prev], w_hh.T, gates_h)
        _cell(rnn.lstm_cell, hs[cur].size, gates_x[t], gates_h, contiguous(bias), cs[prev], hs[cur], cs[cur], acts[t])
    return hs, cs, acts


def lstm_backward(grad_out, grad_h_n, grad_c_n, w_hh, cs, acts, reverse: bool, grad_gates, grad_h0, grad_c0):
    """Backpropagate through :func:`lstm_forward`: the pre-activation gates' gradient and h0's, c0's."""
    rnn = kernels.rnn
    grad_out = contiguous(grad_out)
    unary_op("copy", grad_h_n, grad_h0)  # grad_h0 carries the recurrent gradient from step to step
    unary_op("copy", grad_c_n, grad_c0)
    for t in reversed(_steps(grad_out.shape[0], reverse)):
        prev, cur = _slots(t, reverse)
        _cell(rnn.lstm_cell_backward, grad_c0.size, grad_out[t], grad_h0, grad_c0, acts[t], cs[prev], cs[cur],
              grad_gates[t])
        matmul(grad_gates[t], w_hh, grad_h0)
    return grad_gates, grad_h0, grad_c0


def gru_forward(gates_x, w_hh, bias_ih, bias_hh, h0, reverse: bool, hs, acts):
    """Run a GRU over time: fills ``hs`` (T + 1, B, H) and ``acts`` (T, B, 4H)."""
    rnn = kernels.rnn
    steps = gates_x.shape[0]
    unary_op("copy", h0, hs[steps if reverse else 0])
    gates_x = contiguous(gates_x)
    gates_h = DeviceArray.empty((h0.shape[0], w_hh.shape[0]), w_hh.dtype)
    for t in _steps(steps, reverse):
        prev, cur = _slots(t, reverse)
        matmul(hs[prev], w_hh.T, gates_h)
        _cell(rnn.gru_cell, hs[cur].size, gates_x[t], gates_h, contiguous(bias_ih), contiguous(bias_hh), hs[prev],
              hs[cur], acts[t])
    return hs, acts


def gru_backward(grad_out, grad_h_n, w_hh, hs, acts, reverse: bool, grad_gates_x, grad_gates_h, grad_h0):
    """Backpropagate through :func:`gru_forward`: the gradients of x @ W_ih.T + b_ih and of
    h @ W_hh.T + b_hh, and h0's."""
    rnn = kernels.rnn
    grad_out = contiguous(grad_out)
    unary_op("copy", grad_h_n, grad_h0)  # grad_h0 carries the direct z * dh term from step to step
    recurrent = unary_op("copy", 0, DeviceArray.empty(grad_h0.shape, grad_h0.dtype))
    for t in reversed(_steps(grad_out.shape[0], reverse)):
        prev, _ = _slots(t, reverse)
        _cell(rnn.gru_cell_backward, grad_h0.size, grad_out[t], recurrent, grad_h0, acts[t], hs[prev],
              grad_gates_x[t], grad_gates_h[t])
        matmul(grad_gates_h[t], w_hh, recurrent)
    binary_op("add", grad_h0, recurrent, grad_h0)
    return grad_gates_x, grad_gates_h, grad_h0
