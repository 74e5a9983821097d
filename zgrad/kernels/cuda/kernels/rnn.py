"""CUDA kernels of one LSTM or GRU time step, forward and backward, one thread per (batch, hidden
unit): the same step as :mod:`zgrad.kernels.cpu.kernels.rnn` (gate order, saved activations, in-place
state gradients), except that the recurrent term ``gates_h`` is (B, G*H), not transposed. The
matrix products of the time loop are :func:`zgrad.kernels.cuda.kernels.linalg.matmul`. Kernels only.
"""

from __future__ import annotations

from numba import cuda

from zgrad.kernels.cuda.kernels.common import device, kernel, math

__all__ = ["lstm_cell", "lstm_cell_backward", "gru_cell", "gru_cell_backward"]


@device
def _sigmoid(x, T):
    if x >= T(0):
        return T(1) / (T(1) + math.exp(-x))
    e = math.exp(x)
    return e / (T(1) + e)


@kernel
def lstm_cell(gates_x, gates_h, bias, c_prev, h_out, c_out, acts):
    """acts = (i, f, g, o); c_out = f*c_prev + i*g; h_out = o*tanh(c_out); bias = b_ih + b_hh."""
    T = acts.dtype.type
    hidden = h_out.shape[1]
    for e in range(cuda.grid(1), h_out.size, cuda.gridsize(1)):
        b, j = e // hidden, e % hidden
        i = _sigmoid(gates_x[b, j] + gates_h[b, j] + bias[j], T)
        f = _sigmoid(gates_x[b, hidden + j] + gates_h[b, hidden + j] + bias[hidden + j], T)
        g = math.tanh(gates_x[b, 2 * hidden + j] + gates_h[b, 2 * hidden + j] + bias[2 * hidden + j])
        o = _sigmoid(gates_x[b, 3 * hidden + j] + gates_h[b, 3 * hidden + j] + bias[3 * hidden + j], T)
        acts[b, j], acts[b, hidden + j], acts[b, 2 * hidden + j], acts[b, 3 * hidden + j] = i, f, g, o
        c = f * c_prev[b, j] + i * g
        c_out[b, j] = c
        h_out[b, j] = o * math.tanh(c)


@kernel
def lstm_cell_backward(grad_h, grad_h_rec, grad_c, acts, c_prev, c, grad_gates):
    """Gradients of one step w.r.t. its pre-activation gates; ``grad_c`` (reaching c_t) is
    overwritten by the gradient reaching c_prev."""
    T = acts.dtype.type
    hidden = grad_c.shape[1]
    for e in range(cuda.grid(1), grad_c.size, cuda.gridsize(1)):
        b, j = e // hidden, e % hidden
        i, f, g, o = acts[b, j], acts[b, hidden + j], acts[b, 2 * hidden + j], acts[b, 3 * hidden + j]
        tanh_c = math.tanh(c[b, j])
        dh = grad_h[b, j] + grad_h_rec[b, j]
        dc = grad_c[b, j] + dh * o * (T(1) - tanh_c * tanh_c)
        grad_gates[b, j] = dc * g * i * (T(1) - i)
        grad_gates[b, hidden + j] = dc * c_prev[b, j] * f * (T(1) - f)
        grad_gates[b, 2 * hidden + j] = dc * i * (T(1) - g * g)
        grad_gates[b, 3 * hidden + j] = dh * tanh_c * o * (T(1) - o)
        grad_c[b, j] = dc * f


@kernel
def gru_cell(gates_x, gates_h, bias_ih, bias_hh, h_prev, h_out, acts):
    """r, z = sigmoid(..), n = tanh(x_n + b_in + r*(W_hn h + b_hn)), h_out = (1-z)*n + z*h_prev;
    acts = (r, z, n, W_hn h + b_hn)."""
    T = acts.dtype.type
    hidden = h_out.shape[1]
    for e in range(cuda.grid(1), h_out.size, cuda.gridsize(1)):
        b, j = e // hidden, e % hidden
        r = _sigmoid(gates_x[b, j] + bias_ih[j] + gates_h[b, j] + bias_hh[j], T)
        z = _sigmoid(gates_x[b, hidden + j] + bias_ih[hidden + j] + gates_h[b, hidden + j] + bias_hh[hidden + j], T)
        hn = gates_h[b, 2 * hidden + j] + bias_hh[2 * hidden + j]
        n = math.tanh(gates_x[b, 2 * hidden + j] + bias_ih[2 * hidden + j] + r * hn)
        acts[b, j], acts[b, hidden + j], acts[b, 2 * hidden + j], acts[b, 3 * hidden + j] = r, z, n, hn
        h_out[b, j] = (T(1) - z) * n + z * h_prev[b, j]


@kernel
def gru_cell_backward(grad_h, grad_h_rec, grad_h_direct, acts, h_prev, grad_gates_x, grad_gates_h):
    """Gradients of one step w.r.t. both pre-activation gate terms; ``grad_h_direct`` is
    overwritten by this step's direct term z * dh."""
    T = acts.dtype.type
    hidden = h_prev.shape[1]
    for e in range(cuda.grid(1), h_prev.size, cuda.gridsize(1)):
        b, j = e // hidden, e % hidden
        r, z, n, hn = acts[b, j], acts[b, hidden + j], acts[b, 2 * hidden + j], acts[b, 3 * hidden + j]
        dh = grad_h[b, j] + grad_h_rec[b, j] + grad_h_direct[b, j]
        dn = dh * (T(1) - z) * (T(1) - n * n)
        dr = dn * hn * r * (T(1) - r)
        dz = dh * (h_prev[b, j] - n) * z * (T(1) - z)
        grad_gates_x[b, j], grad_gates_x[b, hidden + j], grad_gates_x[b, 2 * hidden + j] = dr, dz, dn
        grad_gates_h[b, j], grad_gates_h[b, hidden + j], grad_gates_h[b, 2 * hidden + j] = dr, dz, dn * r
        grad_h_direct[b, j] = dh * z


def ptx_signatures() -> list:
    """(name, Python function, argument types) of every kernel here, for float32 and float64."""
    from numba import types

    cases = []
    for dt in (types.float32, types.float64):
        m, v, s = dt[:, ::1], dt[::1], dt[:, :]
        cases += [
            ("lstm_cell", lstm_cell.py_func, (m, m, v, s, s, s, m)),
            ("lstm_cell_backward", lstm_cell_backward.py_func, (s, m, m, m, s, s, m)),
            ("gru_cell", gru_cell.py_func, (m, m, v, v, s, s, m)),
            ("gru_cell_backward", gru_cell_backward.py_func, (s, m, m, m, s, m, m)),
        ]
    return cases
