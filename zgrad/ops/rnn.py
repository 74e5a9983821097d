"""One direction of one LSTM or GRU layer over a whole sequence, as one differentiable op.

Forward: the input projection of every time step is one matrix product; the time loop then runs
one recurrent product and one fused gate kernel per step (:mod:`zgrad.kernels.cpu.kernels.rnn`). Backward
runs the loop in reverse to get every step's gate gradients, then forms the weight and input
gradients as one matrix product each over all steps. Layers, directions and dropout between
layers are composed from these ops by :mod:`zgrad.nn.rnn`.

Shapes: x (T, B, I), states (B, H), W_ih (G*H, I), W_hh (G*H, H), biases (G*H,) or None, with
G = 4 (LSTM: i, f, g, o) or 3 (GRU: r, z, n), PyTorch's gate order.
"""

from __future__ import annotations

from zgrad.autograd.function import Op
from zgrad.kernels import dispatch
from zgrad.kernels import dispatch_sequence as DS

__all__ = ["GRULayer", "LSTMLayer"]


def _input_projection(x, w_ih):
    """x @ W_ih.T for every time step at once: (T, B, G*H)."""
    steps, batch, features = x.shape
    return dispatch.matmul(x.reshape(steps * batch, features), w_ih.T).reshape(steps, batch, w_ih.shape[0])


def _rows(a):
    """(T, B, K) as (T*B, K)."""
    return a.reshape(-1, a.shape[-1])


def _previous_states(hs, reverse):
    """The state each step started from, time-ordered: (T*B, H)."""
    return _rows(hs[1:] if reverse else hs[:-1])


def _projection_grads(flat_gates, x, w_ih, need_x, need_w_ih):
    """(grad x, grad W_ih) from the (T*B, G*H) gradient of x @ W_ih.T."""
    grad_x = dispatch.matmul(flat_gates, w_ih).reshape(x.shape) if need_x else None
    return grad_x, (dispatch.matmul(flat_gates.T, _rows(x)) if need_w_ih else None)


def _recurrent_grad(flat_gates, hs, reverse, need_w_hh):
    """grad W_hh from the (T*B, G*H) gradient of h_prev @ W_hh.T."""
    return dispatch.matmul(flat_gates.T, _previous_states(hs, reverse)) if need_w_hh else None


class LSTMLayer(Op):
    """(output (T, B, H), h_n, c_n) of an LSTM layer from x (T, B, I) and (h0, c0)."""

    @staticmethod
    def forward(ctx, x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse):
        steps = x.shape[0]
        bias = dispatch.full((w_ih.shape[0],), 0, x.dtype, dispatch.device_type_of(x)) if b_ih is None else dispatch.binary("add", b_ih, b_hh)
        hs, cs, acts = DS.lstm_forward(_input_projection(x, w_ih), w_hh, bias, h0, c0, reverse)
        ctx.reverse = reverse
        ctx.save_for_backward(x, w_ih, w_hh, hs, cs, acts)
        last = 0 if reverse else steps
        output = hs[:-1] if reverse else hs[1:]
        return output, dispatch.cast(hs[last], x.dtype), dispatch.cast(cs[last], x.dtype)

    @staticmethod
    def backward(ctx, grad_out, grad_h_n, grad_c_n):
        x, w_ih, w_hh, hs, cs, acts = ctx.saved_tensors
        grad_gates, grad_h0, grad_c0 = DS.lstm_backward(grad_out, grad_h_n, grad_c_n, w_hh, cs, acts, ctx.reverse)
        flat = _rows(grad_gates)
        needs = ctx.needs_input_grad
        grad_x, grad_w_ih = _projection_grads(flat, x, w_ih, needs[0], needs[3])
        grad_w_hh = _recurrent_grad(flat, hs, ctx.reverse, needs[4])
        grad_bias = dispatch.reduce_sum(flat, 0) if needs[5] or needs[6] else None  # the same for b_ih and b_hh
        return (grad_x, grad_h0, grad_c0, grad_w_ih, grad_w_hh, grad_bias if needs[5] else None,
                grad_bias if needs[6] else None, None)


class GRULayer(Op):
    """(output (T, B, H), h_n) of a GRU layer from x (T, B, I) and h0."""

    @staticmethod
    def forward(ctx, x, h0, w_ih, w_hh, b_ih, b_hh, reverse):
        steps = x.shape[0]
        zeros = dispatch.full((w_ih.shape[0],), 0, x.dtype, dispatch.device_type_of(x))
        hs, acts = DS.gru_forward(_input_projection(x, w_ih), w_hh, zeros if b_ih is None else b_ih,
                                  zeros if b_hh is None else b_hh, h0, reverse)
        ctx.reverse = reverse
        ctx.save_for_backward(x, w_ih, w_hh, hs, acts)
        output = hs[:-1] if reverse else hs[1:]
        return output, dispatch.cast(hs[0 if reverse else steps], x.dtype)

    @staticmethod
    def backward(ctx, grad_out, grad_h_n):
        x, w_ih, w_hh, hs, acts = ctx.saved_tensors
        grad_gates_x, grad_gates_h, grad_h0 = DS.gru_backward(grad_out, grad_h_n, w_hh, hs, acts, ctx.reverse)
        flat_x, flat_h = _rows(grad_gates_x), _rows(grad_gates_h)
        needs = ctx.needs_input_grad
        grad_x, grad_w_ih = _projection_grads(flat_x, x, w_ih, needs[0], needs[2])
        grad_w_hh = _recurrent_grad(flat_h, hs, ctx.reverse, needs[3])
        grad_b_ih = dispatch.reduce_sum(flat_x, 0) if needs[4] else None
        grad_b_hh = dispatch.reduce_sum(flat_h, 0) if needs[5] else None
        return grad_x, grad_h0, grad_w_ih, grad_w_hh, grad_b_ih, grad_b_hh, None
