"""The CPU backend's ops for sequence models: embeddings, LSTM/GRU recurrences, dropout, GELU and
leaky ReLU, and the general classification and element losses (re-exported by
:mod:`zgrad.kernels.cpu.backend`).

Same contract as the rest of the backend: C-contiguous inputs, results written into ``out``
arguments allocated by :mod:`zgrad.kernels.dispatch_sequence`. Numba kernel modules are imported on
the first call that needs them, so importing this module compiles nothing.

A recurrence runs its time loop here: per step one BLAS product for the recurrent term and one
fused Numba kernel for everything else (:mod:`zgrad.kernels.cpu.kernels.rnn`). States live in
(T + 1, B, H) arrays indexed by time, with the initial state in the extra slot (slot 0 going
forward, slot T in reverse), so that every step's previous state and the whole sequence of
previous states are contiguous views.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from zgrad.kernels.cpu import kernels
from zgrad.kernels.cpu.common import flat

__all__ = [
    "check_index_range", "class_loss", "class_loss_backward", "dropout", "dropout_backward", "embedding", "embedding_backward",
    "embedding_bag", "embedding_bag_backward", "embedding_bag_per_sample_weights_backward", "embedding_renorm",
    "gelu", "gelu_backward", "gru_backward", "gru_forward", "leaky_relu", "leaky_relu_backward",
    "smooth_activation", "smooth_activation_backward",
    "lstm_backward", "lstm_forward", "nll", "nll_backward", "pointwise_loss", "pointwise_loss_backward",
    "pointwise_loss_sum", "zeros",
]


def zeros(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A zero-filled array from calloc: memory a sparse scatter never writes is never touched
    (numpy maps large arrays in 2 MB huge pages, so at that granularity), where ``full(shape, 0)``
    writes every page of, say, an embedding table's gradient first."""
    return np.zeros(shape, dtype=dtype)


# --- embeddings -------------------------------------------------------------------------------

def check_index_range(values, low: int, high: int, skip: int | None, error: Callable[[int], Exception]) -> None:
    """Raise ``error(value)`` for the first integer of ``values`` outside [low, high) that is not
    ``skip`` (the CUDA backend checks on the device and raises at the next wait)."""
    flat = values.reshape(-1)
    if flat.size and (int(flat.min()) < low or int(flat.max()) >= high):
        bad = (flat < low) | (flat >= high)
        if skip is not None:
            bad &= flat != skip
        positions = np.flatnonzero(bad)
        if positions.size:
            raise error(int(flat[positions[0]]))

def embedding(weight, indices, out):
    """out[...] = weight[indices[...]] (``out``: indices.shape + (D,))."""
    kernels.embedding.embedding_forward(out.reshape(-1, weight.shape[1]), weight, flat(indices))
    return out


def embedding_backward(grad, indices, padding_idx: int, scale_grad_by_freq: bool, out):
    """out (zeroed) += grad rows scattered to ``indices``."""
    kernels.embedding.embedding_backward(np.ascontiguousarray(grad).reshape(-1, out.shape[1]),
                                                flat(indices), padding_idx, scale_grad_by_freq, out)
    return out


def embedding_renorm(weight, indices, max_norm: float, norm_type: float) -> None:
    kernels.embedding.embedding_renorm(weight, flat(indices), float(max_norm), float(norm_type))


def embedding_bag(weight, indices, bounds, per_sample_weights, mode: int, padding_idx: int, out, bag_size,
                  max_indices):
    kernels.embedding.embedding_bag_forward(out, weight, indices, bounds, per_sample_weights, mode,
                                                   padding_idx, bag_size, max_indices)
    return out


def embedding_bag_backward(grad, indices, bounds, per_sample_weights, mode: int, padding_idx: int,
                           scale_grad_by_freq: bool, bag_size, max_indices, out):
    kernels.embedding.embedding_bag_backward(np.ascontiguousarray(grad), indices, bounds,
                                                    per_sample_weights, mode, padding_idx, scale_grad_by_freq,
                                                    bag_size, max_indices, out)
    return out


def embedding_bag_per_sample_weights_backward(grad, weight, indices, bounds, padding_idx: int, out):
    kernels.embedding.embedding_bag_per_sample_weights_backward(np.ascontiguousarray(grad), weight,
                                                                       indices, bounds, padding_idx, out)
    return out


# --- recurrences ------------------------------------------------------------------------------

def _slots(t: int, reverse: bool) -> tuple[int, int]:
    """(previous state, this step's state) slots of time step ``t``."""
    return (t + 1, t) if reverse else (t, t + 1)


def _time_steps(steps: int, reverse: bool) -> range:
    return range(steps - 1, -1, -1) if reverse else range(steps)


def lstm_forward(gates_x, w_hh, bias, h0, c0, reverse: bool, hs, cs, acts):
    """Run an LSTM over time: ``gates_x`` (T, B, 4H) = x @ W_ih.T, ``bias`` = b_ih + b_hh.

    Fills ``hs``/``cs`` (T + 1, B, H) and the gate activations ``acts`` (T, B, 4H).
    """
    cell = kernels.rnn.lstm_cell_forward
    steps = gates_x.shape[0]
    first = steps if reverse else 0
    hs[first], cs[first] = h0, c0
    gates_h_t = np.empty((w_hh.shape[0], h0.shape[0]), w_hh.dtype)
    for t in _time_steps(steps, reverse):
        prev, cur = _slots(t, reverse)
        np.matmul(w_hh, hs[prev].T, out=gates_h_t)
        cell(gates_x[t], gates_h_t, bias, cs[prev], hs[cur], cs[cur], acts[t])
    return hs, cs, acts


def lstm_backward(grad_out, grad_h_n, grad_c_n, w_hh, cs, acts, reverse: bool, grad_gates, grad_h0, grad_c0):
    """Backpropagate through :func:`lstm_forward`: fills ``grad_gates`` (T, B, 4H) with the
    gradient of the pre-activation gates and ``grad_h0``/``grad_c0`` with the initial states'."""
    cell = kernels.rnn.lstm_cell_backward
    grad_out = np.ascontiguousarray(grad_out)
    np.copyto(grad_h0, grad_h_n)  # grad_h0 carries the recurrent gradient from step to step
    np.copyto(grad_c0, grad_c_n)
    steps = grad_out.shape[0]
    for t in reversed(_time_steps(steps, reverse)):
        prev, cur = _slots(t, reverse)
        cell(grad_out[t], grad_h0, grad_c0, acts[t], cs[prev], cs[cur], grad_gates[t])
        np.matmul(grad_gates[t], w_hh, out=grad_h0)
    return grad_gates, grad_h0, grad_c0


def gru_forward(gates_x, w_hh, bias_ih, bias_hh, h0, reverse: bool, hs, acts):
    """Run a GRU over time: ``gates_x`` (T, B, 3H) = x @ W_ih.T. Fills ``hs`` (T + 1, B, H) and
    ``acts`` (T, B, 4H): r, z, n and W_hn h + b_hn."""
    cell = kernels.rnn.gru_cell_forward
    steps = gates_x.shape[0]
    hs[steps if reverse else 0] = h0
    gates_h_t = np.empty((w_hh.shape[0], h0.shape[0]), w_hh.dtype)
    for t in _time_steps(steps, reverse):
        prev, cur = _slots(t, reverse)
        np.matmul(w_hh, hs[prev].T, out=gates_h_t)
        cell(gates_x[t], gates_h_t, bias_ih, bias_hh, hs[prev], hs[cur], acts[t])
    return hs, acts


def gru_backward(grad_out, grad_h_n, w_hh, hs, acts, reverse: bool, grad_gates_x, grad_gates_h, grad_h0):
    """Backpropagate through :func:`gru_forward`: fills the gradients of x @ W_ih.T + b_ih and of
    h @ W_hh.T + b_hh (both (T, B, 3H)) and ``grad_h0``."""
    cell = kernels.rnn.gru_cell_backward
    grad_out = np.ascontiguousarray(grad_out)
    np.copyto(grad_h0, grad_h_n)  # grad_h0 carries the direct z * dh term from step to step
    recurrent = np.zeros_like(grad_h0)
    steps = grad_out.shape[0]
    for t in reversed(_time_steps(steps, reverse)):
        prev, _ = _slots(t, reverse)
        cell(grad_out[t], recurrent, grad_h0, acts[t], hs[prev], grad_gates_x[t], grad_gates_h[t])
        np.matmul(grad_gates_h[t], w_hh, out=recurrent)
    np.add(grad_h0, recurrent, out=grad_h0)
    return grad_gates_x, grad_gates_h, grad_h0


# --- dropout and activations ------------------------------------------------------------------

def _row_view(a: np.ndarray, rows: int) -> np.ndarray:
    """``a`` as a C-contiguous (rows, size / rows) view (or copy)."""
    return np.ascontiguousarray(a).reshape(rows, a.size // max(rows, 1))


def dropout(x, noise, p: float, keep, out):
    """out = x * (noise >= p) / (1 - p), one ``noise``/``keep`` value per row of an (R, S) view."""
    rows = keep.shape[0]
    kernels.activation.dropout_forward(_row_view(x, rows), noise, float(p), keep, _row_view(out, rows))
    return out


def dropout_backward(grad, keep, p: float, out):
    rows = keep.shape[0]
    kernels.activation.dropout_backward(_row_view(grad, rows), keep, float(p), _row_view(out, rows))
    return out


def gelu(x, tanh_approximation: bool, out):
    kernels.activation.gelu_forward(flat(x), tanh_approximation, out.reshape(-1))
    return out


def gelu_backward(grad, x, tanh_approximation: bool, out):
    kernels.activation.gelu_backward(flat(grad), flat(x), tanh_approximation, out.reshape(-1))
    return out


def smooth_activation(x, code: int, beta: float, threshold: float, out):
    kernels.activation.smooth_activation_forward(flat(x), code, float(beta), float(threshold), out.reshape(-1))
    return out


def smooth_activation_backward(grad, x, code: int, beta: float, threshold: float, out):
    kernels.activation.smooth_activation_backward(flat(grad), flat(x), code, float(beta), float(threshold),
                                                  out.reshape(-1))
    return out


def leaky_relu(x, negative_slope: float, out):
    kernels.activation.leaky_relu_forward(flat(x), float(negative_slope), out.reshape(-1))
    return out


def leaky_relu_backward(grad, x, negative_slope: float, out):
    kernels.activation.leaky_relu_backward(flat(grad), flat(x), float(negative_slope), out.reshape(-1))
    return out


# --- losses -----------------------------------------------------------------------------------

def class_loss(logits, targets, weight, ignore_index: int, smoothing: float, probs_out, loss_out, weight_out):
    kernels.loss.class_loss_forward(np.ascontiguousarray(logits), targets, weight, ignore_index,
                                           float(smoothing), probs_out, loss_out, weight_out)
    return loss_out


def class_loss_backward(probs, targets, weight, ignore_index: int, smoothing: float, row_grad, out):
    kernels.loss.class_loss_backward(probs, targets, weight, ignore_index, float(smoothing), row_grad, out)
    return out


def nll(log_probs, targets, weight, ignore_index: int, loss_out, weight_out):
    kernels.loss.nll_forward(np.ascontiguousarray(log_probs), targets, weight, ignore_index, loss_out,
                                    weight_out)
    return loss_out


def nll_backward(targets, weight, ignore_index: int, row_grad, out):
    kernels.loss.nll_backward(targets, weight, ignore_index, row_grad, out)
    return out


def pointwise_loss(a, b, squared: bool, out):
    kernels.loss.pointwise_loss_forward(flat(a), flat(b), squared, out.reshape(-1))
    return out


def pointwise_loss_sum(a, b, squared: bool, divisor: float, out):
    """out (0-d) = sum((a - b)**2) or sum(|a - b|), over ``divisor`` (NaN for 0)."""
    total = kernels.loss.pointwise_loss_sum(flat(a), flat(b), squared)
    out[()] = total / divisor if divisor else np.nan
    return out


def pointwise_loss_backward(a, b, grad, squared: bool, divisor: float, out):
    """out = d loss / d a for the gradient ``grad`` of a loss over ``divisor`` elements (1 for a
    sum or no reduction; a one-element ``grad`` broadcasts and is divided)."""
    kernels.loss.pointwise_loss_backward(flat(a), flat(b), flat(grad), squared, divisor, out.reshape(-1))
    return out
