"""Element-wise ops with numpy broadcasting. Gradients are summed back to each input's shape by
the engine's validation, so a backward here returns the broadcast-shaped gradient."""

from __future__ import annotations

import numpy as np

from zgrad.autograd.function import Op
from zgrad.kernels import dispatch as D


class Add(Op):
    @staticmethod
    def forward(ctx, a, b):
        return D.binary("add", a, b)

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class Sub(Op):
    @staticmethod
    def forward(ctx, a, b):
        return D.binary("sub", a, b)

    @staticmethod
    def backward(ctx, grad):
        return grad, (D.unary("neg", grad) if ctx.needs_input_grad[1] else None)


class Mul(Op):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return D.binary("mul", a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        ga = D.binary("mul", grad, b) if ctx.needs_input_grad[0] else None
        gb = D.binary("mul", grad, a) if ctx.needs_input_grad[1] else None
        return ga, gb


class Div(Op):
    @staticmethod
    def forward(ctx, a, b):
        out = D.binary("div", a, b)
        ctx.save_for_backward(b, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        b, out = ctx.saved_tensors
        ga = D.binary("div", grad, b) if ctx.needs_input_grad[0] else None
        gb = None
        if ctx.needs_input_grad[1]:
            gb = D.unary("neg", D.binary("div", D.binary("mul", grad, out), b))
        return ga, gb


class Pow(Op):
    @staticmethod
    def forward(ctx, a, b):
        out = D.binary("pow", a, b)
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        a, b, out = ctx.saved_tensors
        ga = gb = None
        if ctx.needs_input_grad[0]:
            # A Python exponent stays a Python number: a 0-d array would promote float32 to float64.
            b_minus_1 = b - 1 if isinstance(b, (int, float)) else D.binary("sub", b, 1)
            ga = D.binary("mul", grad, D.binary("mul", b, D.binary("pow", a, b_minus_1)))
        if ctx.needs_input_grad[1]:
            log_a = float(np.log(a)) if isinstance(a, (int, float)) else D.unary("log", a)
            gb = D.binary("mul", D.binary("mul", grad, out), log_a)
        return ga, gb


class Neg(Op):
    @staticmethod
    def forward(ctx, x):
        return D.unary("neg", x)

    @staticmethod
    def backward(ctx, grad):
        return D.unary("neg", grad)


class Exp(Op):
    @staticmethod
    def forward(ctx, x):
        out = D.unary("exp", x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return D.binary("mul", grad, out)


class Log(Op):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return D.unary("log", x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return D.binary("div", grad, x)


class _Activation(Op):
    """act(x) on a fused kernel; backward from the saved output (or input, for relu)."""

    kernel = ""
    saves_output = True

    @classmethod
    def forward(cls, ctx, x):
        out = D.unary(cls.kernel, x)
        ctx.save_for_backward(out if cls.saves_output else x)
        return out

    @classmethod
    def backward(cls, ctx, grad):
        (saved,) = ctx.saved_tensors
        return D.activation_backward(f"{cls.kernel}_backward", grad, saved)


class Tanh(_Activation):
    kernel = "tanh"


class Sigmoid(_Activation):
    kernel = "sigmoid"


class Relu(_Activation):
    kernel = "relu"
    saves_output = False


class Cast(Op):
    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = x.dtype
        return D.cast(x, dtype)

    @staticmethod
    def backward(ctx, grad):
        return D.cast(grad, ctx.dtype), None
