"""Numba kernels of one LSTM or GRU time step, forward and backward, each one fused pass.

The matrix products stay outside (BLAS, in the time loop of :mod:`zgrad.kernels.cpu.sequence`);
a kernel here takes the pre-activation gate terms and does everything else of the step in one
pass: bias, gate nonlinearities, the cell update and the saved activations, or in backward every
gate gradient at once.

Layouts, per step (B = batch, H = hidden size, gate blocks in PyTorch's order):

- ``gates_x`` (B, G*H): the input projection x_t @ W_ih.T of this step, rows contiguous;
- ``gates_h_t`` (G*H, B): the recurrent product W_hh @ h_prev.T, *transposed*. OpenBLAS computes
  this M=G*H, N=B product faster than h_prev @ W_hh.T for small batches, which pays for the
  strided read here;
- states and their gradients (B, H); saved activations (B, G*H), or (B, 4H) for the GRU (r, z, n
  and the recurrent candidate term W_hn h + b_hn).

Gate blocks are processed in separate loops, one nonlinearity each, so that every inner loop
vectorises. The kernels run on the caller's thread: a step is about as much work as a parallel
launch costs, and a prange version of the forward step measured slower than the serial one
(figures: bench/README.md, Design figures). The recurrent products (BLAS) are where threads help.
Arguments never overlap, except the in-place state gradients named in each docstring, which are
read and written at the same position only.
"""

from __future__ import annotations

from zgrad.kernels.cpu.kernels import vector_math
from zgrad.kernels._jit import kernel

__all__ = ["gru_cell_backward", "gru_cell_forward", "lstm_cell_backward", "lstm_cell_forward"]


@kernel
def lstm_cell_forward(gates_x, gates_h_t, bias, c_prev, h_out, c_out, acts):
    """One LSTM step: acts = (i, f, g, o), c_out = f*c_prev + i*g, h_out = o*tanh(c_out).

    ``bias`` (4H) is b_ih + b_hh.
    """
    batch, four_h = gates_x.shape
    hidden = four_h // 4
    for b in range(batch):
        act = acts[b]
        gx = gates_x[b]
        for j in range(four_h):
            act[j] = gx[j] + gates_h_t[j, b] + bias[j]
        for j in range(2 * hidden):
            act[j] = vector_math.sigmoid(act[j])
        for j in range(2 * hidden, 3 * hidden):
            act[j] = vector_math.tanh(act[j])
        for j in range(3 * hidden, four_h):
            act[j] = vector_math.sigmoid(act[j])
        for j in range(hidden):
            c = act[hidden + j] * c_prev[b, j] + act[j] * act[2 * hidden + j]
            c_out[b, j] = c
            h_out[b, j] = act[3 * hidden + j] * vector_math.tanh(c)


@kernel
def lstm_cell_backward(grad_h, grad_h_rec, grad_c, acts, c_prev, c, grad_gates):
    """Gradients of one LSTM step with respect to its pre-activation gates and c_prev.

    The gradient reaching h_t is ``grad_h + grad_h_rec`` (from the output and from step t+1);
    ``grad_c`` holds the gradient reaching c_t and is overwritten, in place, by the one reaching
    c_prev.
    """
    batch, four_h = acts.shape
    hidden = four_h // 4
    one = acts.dtype.type(1)
    for b in range(batch):
        act = acts[b]
        dgate = grad_gates[b]
        for j in range(hidden):
            i, f, g, o = act[j], act[hidden + j], act[2 * hidden + j], act[3 * hidden + j]
            tanh_c = vector_math.tanh(c[b, j])
            dh = grad_h[b, j] + grad_h_rec[b, j]
            dc = grad_c[b, j] + dh * o * (one - tanh_c * tanh_c)
            dgate[j] = dc * g * i * (one - i)
            dgate[hidden + j] = dc * c_prev[b, j] * f * (one - f)
            dgate[2 * hidden + j] = dc * i * (one - g * g)
            dgate[3 * hidden + j] = dh * tanh_c * o * (one - o)
            grad_c[b, j] = dc * f


@kernel
def gru_cell_forward(gates_x, gates_h_t, bias_ih, bias_hh, h_prev, h_out, acts):
    """One GRU step: r, z = sigmoid(..), n = tanh(x_n + b_in + r*(W_hn h + b_hn)),
    h_out = (1-z)*n + z*h_prev; acts = (r, z, n, W_hn h + b_hn)."""
    batch, three_h = gates_x.shape
    hidden = three_h // 3
    one = acts.dtype.type(1)
    for b in range(batch):
        act = acts[b]
        gx = gates_x[b]
        for j in range(2 * hidden):
            act[j] = vector_math.sigmoid(gx[j] + bias_ih[j] + gates_h_t[j, b] + bias_hh[j])
        for j in range(2 * hidden, three_h):
            act[hidden + j] = gates_h_t[j, b] + bias_hh[j]
        for j in range(hidden):
            act[2 * hidden + j] = vector_math.tanh(gx[2 * hidden + j] + bias_ih[2 * hidden + j]
                                                + act[j] * act[3 * hidden + j])
        for j in range(hidden):
            z = act[hidden + j]
            h_out[b, j] = (one - z) * act[2 * hidden + j] + z * h_prev[b, j]


@kernel
def gru_cell_backward(grad_h, grad_h_rec, grad_h_direct, acts, h_prev, grad_gates_x, grad_gates_h):
    """Gradients of one GRU step with respect to both pre-activation gate terms.

    The gradient reaching h_t is ``grad_h + grad_h_rec + grad_h_direct`` (output, the product
    from step t+1, and step t+1's direct z*h term); ``grad_h_direct`` is overwritten, in place,
    by this step's direct term z * dh. ``grad_gates_h`` is the gradient of W_hh h + b_hh.
    """
    batch, three_h = grad_gates_x.shape
    hidden = three_h // 3
    one = acts.dtype.type(1)
    for b in range(batch):
        act = acts[b]
        dx = grad_gates_x[b]
        dhh = grad_gates_h[b]
        for j in range(hidden):
            r, z, n, hn = act[j], act[hidden + j], act[2 * hidden + j], act[3 * hidden + j]
            dh = grad_h[b, j] + grad_h_rec[b, j] + grad_h_direct[b, j]
            dn = dh * (one - z) * (one - n * n)
            dr = dn * hn * r * (one - r)
            dz = dh * (h_prev[b, j] - n) * z * (one - z)
            dx[j] = dr
            dx[hidden + j] = dz
            dx[2 * hidden + j] = dn
            dhh[j] = dr
            dhh[hidden + j] = dz
            dhh[2 * hidden + j] = dn * r
            grad_h_direct[b, j] = dh * z
