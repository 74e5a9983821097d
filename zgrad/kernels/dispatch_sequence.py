"""Dispatch of the ops of sequence models: embeddings, LSTM/GRU recurrences, dropout, GELU and
leaky ReLU.

The companion of :mod:`zgrad.kernels.dispatch` (its rules hold here: the backend comes from the
arrays' device, outputs are allocated here, indices are checked here with PyTorch's messages),
split off to keep each module to one job. Operands of one op share a floating dtype; the ops
check that, naming the layer, as PyTorch does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.kernels.dispatch import INT64, as_dtype, as_int64, backend_of
from zgrad.kernels.vocabulary import SMOOTH_ACTIVATIONS

__all__ = [
    "EMBEDDING_BAG_MODES", "check_embedding_indices", "embedding", "embedding_backward", "embedding_renorm_",
    "embedding_bag", "embedding_bag_backward", "lstm_forward", "lstm_backward", "gru_forward", "gru_backward",
    "dropout", "dropout_backward", "gelu", "gelu_backward", "leaky_relu", "leaky_relu_backward",
    "smooth_activation", "smooth_activation_backward",
]

EMBEDDING_BAG_MODES = {"sum": 0, "mean": 1, "max": 2}
_NO_INDEX = -1  # padding_idx meaning "none" in the kernels


def _padding(padding_idx: int | None) -> int:
    return _NO_INDEX if padding_idx is None else padding_idx


# --- embeddings -------------------------------------------------------------------------------

def check_embedding_indices(indices: Any, num_embeddings: int) -> Any:
    """``indices`` as a C-contiguous int64 array.

    Raises:
        IndexError: a value is outside [0, num_embeddings): PyTorch's "index out of range in self",
            then the first such index and the valid range (for CUDA indices at this thread's next
            wait for the device: the check runs there without a wait).
        TypeError: the indices are not integers.
    """
    if indices.dtype.kind not in "iu":
        raise TypeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                        f"Long, Int; but got {indices.dtype} instead (while checking arguments for embedding)")
    valid = f"valid indices are 0..{num_embeddings - 1}" if num_embeddings else "the table has no rows"
    indices = as_int64(indices)
    backend_of(indices).check_index_range(
        indices, 0, num_embeddings, None, lambda bad: IndexError(f"index out of range in self: got index {bad}, {valid}"))
    return indices


def embedding(weight: Any, indices: Any):
    """weight[indices]: indices.shape + (D,)."""
    be = backend_of(weight, indices)
    return be.embedding(weight, indices, be.empty((*indices.shape, weight.shape[1]), weight.dtype))


def embedding_backward(grad: Any, indices: Any, num_embeddings: int, padding_idx: int | None,
                       scale_grad_by_freq: bool):
    """The (num_embeddings, D) gradient of :func:`embedding`: ``grad`` rows added at ``indices``."""
    be = backend_of(grad, indices)
    out = be.zeros((num_embeddings, grad.shape[-1]), grad.dtype)
    return be.embedding_backward(grad, indices, _padding(padding_idx), scale_grad_by_freq, out)


def embedding_renorm_(weight: Any, indices: Any, max_norm: float, norm_type: float) -> None:
    """Scale the rows of ``weight`` at ``indices`` in place down to ``max_norm`` (PyTorch's rule)."""
    backend_of(weight, indices).embedding_renorm(weight, indices, max_norm, norm_type)


def embedding_bag(weight: Any, indices: Any, bounds: Any, per_sample_weights: Any, mode: str,
                  padding_idx: int | None):
    """Reduce the rows of each bag ``indices[bounds[b]:bounds[b + 1]]``.

    Returns (out (num_bags, D), bag_size (num_bags,), max_indices (num_bags, D) in max mode, else
    empty); the last two are what :func:`embedding_bag_backward` needs.
    """
    be = backend_of(weight, indices)
    bags, width = bounds.shape[0] - 1, weight.shape[1]
    code = EMBEDDING_BAG_MODES[mode]
    psw = be.empty((0,), weight.dtype) if per_sample_weights is None else as_dtype(per_sample_weights, weight.dtype)
    bag_size = be.empty((bags,), INT64)
    max_indices = be.empty((bags, width) if mode == "max" else (0, 0), INT64)
    out = be.empty((bags, width), weight.dtype)
    be.embedding_bag(weight, as_int64(indices), as_int64(bounds), psw, code, _padding(padding_idx), out, bag_size,
                     max_indices)
    return out, bag_size, max_indices


def embedding_bag_backward(grad: Any, weight: Any, indices: Any, bounds: Any, per_sample_weights: Any, mode: str,
                           padding_idx: int | None, scale_grad_by_freq: bool, bag_size: Any, max_indices: Any,
                           needs_weight: bool, needs_per_sample_weights: bool):
    """(grad of weight, grad of per_sample_weights) of :func:`embedding_bag`, None where not needed."""
    be = backend_of(grad, weight)
    padding = _padding(padding_idx)
    psw = be.empty((0,), weight.dtype) if per_sample_weights is None else as_dtype(per_sample_weights, weight.dtype)
    grad_weight = grad_psw = None
    if needs_weight:
        grad_weight = be.embedding_bag_backward(grad, indices, bounds, psw, EMBEDDING_BAG_MODES[mode], padding,
                                                scale_grad_by_freq, bag_size, max_indices,
                                                be.zeros(weight.shape, weight.dtype))
    if needs_per_sample_weights:
        grad_psw = be.embedding_bag_per_sample_weights_backward(grad, weight, indices, bounds, padding,
                                                                be.empty(indices.shape, weight.dtype))
    return grad_weight, grad_psw


# --- recurrences ------------------------------------------------------------------------------

def lstm_forward(gates_x: Any, w_hh: Any, bias: Any, h0: Any, c0: Any, reverse: bool):
    """Run an LSTM layer over (T, B, 4H) input projections: (hs, cs, acts), see
    :func:`zgrad.kernels.cpu.sequence.lstm_forward`."""
    be = backend_of(gates_x, w_hh)
    steps, batch, gates = gates_x.shape
    hidden, dtype = w_hh.shape[1], gates_x.dtype
    states = (steps + 1, batch, hidden)
    return be.lstm_forward(gates_x, w_hh, bias, h0, c0, reverse, be.empty(states, dtype), be.empty(states, dtype),
                           be.empty((steps, batch, gates), dtype))


def lstm_backward(grad_out: Any, grad_h_n: Any, grad_c_n: Any, w_hh: Any, cs: Any, acts: Any, reverse: bool):
    """(grad of the pre-activation gates (T, B, 4H), grad of h0, grad of c0)."""
    be = backend_of(grad_out, w_hh)
    dtype = acts.dtype
    state = grad_h_n.shape
    return be.lstm_backward(grad_out, grad_h_n, grad_c_n, w_hh, cs, acts, reverse, be.empty(acts.shape, dtype),
                            be.empty(state, dtype), be.empty(state, dtype))


def gru_forward(gates_x: Any, w_hh: Any, bias_ih: Any, bias_hh: Any, h0: Any, reverse: bool):
    """Run a GRU layer over (T, B, 3H) input projections: (hs, acts)."""
    be = backend_of(gates_x, w_hh)
    steps, batch, gates = gates_x.shape
    hidden, dtype = w_hh.shape[1], gates_x.dtype
    return be.gru_forward(gates_x, w_hh, bias_ih, bias_hh, h0, reverse, be.empty((steps + 1, batch, hidden), dtype),
                          be.empty((steps, batch, 4 * hidden), dtype))


def gru_backward(grad_out: Any, grad_h_n: Any, w_hh: Any, hs: Any, acts: Any, reverse: bool):
    """(grad of x @ W_ih.T + b_ih, grad of h @ W_hh.T + b_hh, both (T, B, 3H), grad of h0)."""
    be = backend_of(grad_out, w_hh)
    dtype = acts.dtype
    gates = (*grad_out.shape[:2], w_hh.shape[0])
    return be.gru_backward(grad_out, grad_h_n, w_hh, hs, acts, reverse, be.empty(gates, dtype),
                           be.empty(gates, dtype), be.empty(grad_h_n.shape, dtype))


# --- dropout and activations ------------------------------------------------------------------

def dropout(x: Any, noise: Any, p: float):
    """(x * keep / (1 - p), keep) with keep = noise >= p, one ``noise`` value per row of x viewed
    as (len(noise), -1)."""
    be = backend_of(x, noise)
    keep = be.empty(noise.shape, np.dtype(np.bool_))
    return be.dropout(x, noise, p, keep, be.empty(x.shape, x.dtype)), keep


def dropout_backward(grad: Any, keep: Any, p: float):
    be = backend_of(grad, keep)
    return be.dropout_backward(grad, keep, p, be.empty(grad.shape, grad.dtype))


def gelu(x: Any, tanh_approximation: bool):
    be = backend_of(x)
    return be.gelu(x, tanh_approximation, be.empty(x.shape, x.dtype))


def gelu_backward(grad: Any, x: Any, tanh_approximation: bool):
    be = backend_of(grad, x)
    return be.gelu_backward(as_dtype(grad, x.dtype), x, tanh_approximation, be.empty(x.shape, x.dtype))


def smooth_activation(x: Any, name: str, beta: float = 1.0, threshold: float = 20.0):
    """SiLU, Mish or Softplus (``name``, one of :data:`SMOOTH_ACTIVATIONS`) of ``x``; ``beta`` and
    ``threshold`` are Softplus's."""
    be = backend_of(x)
    return be.smooth_activation(x, SMOOTH_ACTIVATIONS.index(name), beta, threshold, be.empty(x.shape, x.dtype))


def smooth_activation_backward(grad: Any, x: Any, name: str, beta: float = 1.0, threshold: float = 20.0):
    be = backend_of(grad, x)
    return be.smooth_activation_backward(as_dtype(grad, x.dtype), x, SMOOTH_ACTIVATIONS.index(name), beta, threshold,
                                         be.empty(x.shape, x.dtype))


def leaky_relu(x: Any, negative_slope: float):
    be = backend_of(x)
    return be.leaky_relu(x, negative_slope, be.empty(x.shape, x.dtype))


def leaky_relu_backward(grad: Any, x: Any, negative_slope: float):
    be = backend_of(grad, x)
    return be.leaky_relu_backward(as_dtype(grad, x.dtype), x, negative_slope, be.empty(x.shape, x.dtype))
