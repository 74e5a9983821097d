"""Double backward (``create_graph=True``): gradients that are themselves differentiable.

Each case is a scalar function of a few float64 parameters, written once for both libraries. The
test takes its gradient with ``create_graph=True``, then the gradient of ``sum(grad * v)`` (a
Hessian-vector product) and compares both with PyTorch's; without torch, the Hessian-vector
product is checked against finite differences of the first gradient.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import zgrad
from cuda_helpers import requires_cuda
from helpers import torch

RNG = np.random.default_rng(7)


def _param(lib, array):
    return lib.tensor(array, dtype=lib.float64, requires_grad=True)


def _positive(shape):
    return RNG.uniform(0.5, 1.5, shape)


def _signed(shape):
    return RNG.uniform(-1.5, 1.5, shape)


def _mlp(lib, x, w1, b1, w2, activation):
    F = lib.nn.functional
    return F.linear(activation(F.linear(x, w1, b1)), w2)


def _conv_layer(lib, x, weight, bias, **options):
    """``nn.Conv2d(**options)`` applied with ``weight`` and ``bias`` (torch's layer pads apart for a
    padding_mode other than zeros; zgrad's convolves in that mode)."""
    layer = lib.nn.Conv2d(weight.shape[1] * options.get("groups", 1), weight.shape[0], tuple(weight.shape[2:]),
                          **options).double()
    del layer.weight, layer.bias
    layer.weight, layer.bias = weight, bias
    return layer(x)


def _self_attention(lib, x, w_in, b_in, w_out):
    """Packed-weight self-attention of a sequence-first (L, N, E) input, and of the same values
    lying batch-first in memory (passed as a transposed view, as ``batch_first`` modules do): the
    two ways the projection is split into heads."""
    F = lib.nn.functional

    def attend(query):
        return F.multi_head_attention_forward(query, query, query, 4, 2, w_in, b_in, None, None, False, 0.0,
                                              w_out, None)[0]

    batch_major = (x.transpose(0, 1) * 1.0).transpose(0, 1)
    return (attend(x) ** 2).sum() + (attend(batch_major) * x.tanh()).sum()


# name -> (parameter arrays, function(lib, *params) -> scalar tensor)
CASES = {
    "arithmetic": ([_signed((3, 4)), _positive((4,))],
                   lambda lib, a, b: ((a * b - a / b + 2.0 * a) ** 2).sum() + (-(a * a)).mean()),
    "pow_tensor_exponent": ([_positive((5,)), _signed((5,))], lambda lib, a, b: (a ** b).sum()),
    "exp_log_sqrt_abs": ([_positive((2, 3))],
                         lambda lib, a: (lib.exp(a) * lib.log(a) + lib.sqrt(a) * lib.abs(a - 1.0)).sum()),
    "clamp": ([_signed((6,))], lambda lib, a: (lib.clamp(a, -0.5, 0.7) * a * a).sum()),
    "unary_math": ([RNG.uniform(0.1, 0.8, (7,))],
                   lambda lib, a: (lib.sin(a) * lib.cos(a) + lib.tan(a) + lib.asin(a) + lib.acos(a) + lib.atan(a)
                                   + lib.sinh(a) * lib.cosh(a) + lib.asinh(a) + lib.atanh(a) + lib.erf(a)
                                   + lib.erfc(a) + lib.erfinv(a) + lib.log1p(a) + lib.expm1(a) + lib.log2(a)
                                   + lib.log10(a) + lib.exp2(a) + lib.rsqrt(a) + lib.reciprocal(a)).sum()),
    "activations": ([_signed((4, 5))],
                    lambda lib, a: (lib.tanh(a) * lib.sigmoid(a) + lib.relu(a) * a
                                    + lib.nn.functional.leaky_relu(a, 0.2) * a
                                    + lib.nn.functional.gelu(a) + lib.nn.functional.gelu(a, approximate="tanh")
                                    + lib.nn.functional.silu(a) + lib.nn.functional.softplus(a, beta=2.0)
                                    + lib.nn.functional.mish(a)).pow(2).sum()),
    "layout": ([_signed((2, 3, 4))],
               lambda lib, a: (a.permute(2, 0, 1).reshape(4, 6)[1:3] ** 2).sum()
               + (lib.cat([a, a * 2], dim=1).sum(dim=(0, 2)) ** 2).sum()
               + (lib.stack([a[0], a[1] ** 2]).expand(3, 2, 3, 4).mean(dim=0) ** 3).sum()
               + sum((part * part).sum() for part in a.chunk(2, dim=2))
               + (a.view(6, 4)[[0, 2, 2]] ** 2).sum()),
    "matmul": ([_signed((2, 3, 4)), _signed((4, 5)), _signed((5,))],
               lambda lib, a, b, c: (((a @ b) ** 2) @ c).sum() + (lib.matmul(c, b.T) ** 3).sum()),
    "mlp_mse": ([_signed((8, 3)), _signed((6, 3)), _signed((6,)), _signed((2, 6))],
                lambda lib, x, w1, b1, w2: lib.nn.functional.mse_loss(_mlp(lib, x, w1, b1, w2, lib.tanh),
                                                                        lib.ones(8, 2, dtype=lib.float64))),
    "mlp_l1_sum": ([_signed((2, 4, 3)), _signed((5, 3)), _signed((5,)), _signed((2, 5))],
                   lambda lib, x, w1, b1, w2: lib.nn.functional.l1_loss(
                       _mlp(lib, x, w1, b1, w2, lib.nn.functional.gelu), lib.zeros(2, 4, 2, dtype=lib.float64),
                       reduction="sum")),
    "cross_entropy": ([_signed((6, 3)), _signed((4, 3)), _signed((4,)), _signed((5, 4))],
                      lambda lib, x, w1, b1, w2: lib.nn.functional.cross_entropy(
                          _mlp(lib, x, w1, b1, w2, lib.sigmoid), lib.tensor([0, 4, 2, 1, 4, 3]))),
    "cross_entropy_ignore_none": ([_signed((5, 4))],
                                  lambda lib, z: (lib.nn.functional.cross_entropy(
                                      z * z, lib.tensor([0, 3, -100, 1, 2]), reduction="none") ** 2).sum()),
    "cross_entropy_weight_smoothing": ([_signed((6, 4)), _signed((2, 4, 3))], lambda lib, z, s: (
        lib.nn.functional.cross_entropy(z * z, lib.tensor([0, 3, -100, 1, 2, 3]),
                                        weight=lib.tensor([0.5, 2.0, 1.0, 1.5], dtype=lib.float64))
        + lib.nn.functional.cross_entropy(z.exp(), lib.tensor([0, 3, 3, 1, -100, 2]), label_smoothing=0.2,
                                          reduction="sum")
        + (lib.nn.functional.cross_entropy(z, lib.tensor([2, 3, 0, -100, 1, 1]),
                                           weight=lib.tensor([0.5, 2.0, 1.0, 1.5], dtype=lib.float64),
                                           label_smoothing=0.3, reduction="none") ** 2).sum()
        + lib.nn.functional.cross_entropy(s * s, lib.tensor([[1, 0, 2], [3, 1, 1]]), ignore_index=1,
                                          weight=lib.tensor([0.5, 2.0, 1.0, 1.5], dtype=lib.float64),
                                          label_smoothing=0.1)
        + (lib.nn.functional.cross_entropy(s.exp(), lib.tensor([[1, 0, 2], [3, 1, 1]]), ignore_index=0,
                                           weight=lib.tensor([0.5, 2.0, 1.0, 1.5], dtype=lib.float64),
                                           reduction="none") ** 3).sum())),
    "norms": ([_signed((2, 4, 3)), _positive((3,)), _signed((3,)), _positive((4,)), _signed((4,))],
              lambda lib, x, w, b, gw, gb: (lib.nn.functional.layer_norm(x * x, (3,), w, b) ** 3).sum()
              + (lib.nn.functional.group_norm(x.exp(), 2, gw, gb) ** 2 * x).sum()
              + (lib.nn.functional.layer_norm(x, (4, 3)) ** 3).sum()),
    "where": ([_signed((3, 4)), _signed((3, 4))],
              lambda lib, a, b: (lib.where(a > 0, a * b, b ** 3) ** 2).sum()),
    "conv_input": ([_signed((2, 2, 6, 5))],
                   lambda lib, x: (lib.nn.functional.conv2d(
                       x * x, lib.tensor(np.linspace(-1, 1, 36).reshape(4, 1, 3, 3), dtype=lib.float64),
                       lib.tensor([0.1, -0.2, 0.3, 0.4], dtype=lib.float64), stride=(2, 1), padding=1, dilation=(1, 2),
                       groups=2) ** 2).sum()),
    "conv_weight": ([_signed((2, 4, 6, 5)), _signed((4, 2, 3, 3)), _signed((4,))],
                    lambda lib, x, w, b: (lib.nn.functional.conv2d(x * x, w * w, b, stride=(2, 1), padding=1,
                                                                    dilation=(1, 2), groups=2) ** 2).sum()
                    + (lib.nn.functional.conv2d(x[0].exp(), w, b * b, padding="same", groups=2) ** 3).sum()),
    "conv_small": ([_signed((1, 2, 4, 4)), _signed((2, 1, 2, 2)), _signed((2,))],
                   lambda lib, x, w, b: (lib.nn.functional.conv2d(x * x, w, b, stride=2, padding=1, groups=2) ** 2).sum()
                   + (lib.nn.functional.conv_transpose2d(x.exp(), w * w, b, stride=2, groups=2) ** 2).sum()),
    "conv_padding_modes": ([_signed((2, 4, 6, 7)), _signed((4, 2, 3, 3)), _signed((4,))],
                           lambda lib, x, w, b: sum(
                               (_conv_layer(lib, x * x, w * w, b, padding=(1, 2), stride=(3, 1), dilation=(1, 2),
                                            groups=2, padding_mode=mode) ** 2).sum()
                               + (_conv_layer(lib, x[0].exp(), w[:, :, :2], b, padding="same", groups=2,
                                              padding_mode=mode) ** 3).sum()
                               for mode in ("reflect", "replicate", "circular"))),
    # 16 channels of 8 x 8: the Winograd path (kernels/cpu/winograd.py) forward and backward
    "conv_winograd": ([_signed((2, 16, 8, 8)), _signed((16, 16, 3, 3)), _signed((16,))],
                      lambda lib, x, w, b: (lib.nn.functional.conv2d(x * x, w * w, b, padding=1) ** 2).sum()
                      + (lib.nn.functional.conv2d(x.exp(), w, b * b) ** 3).sum()),
    "conv_transpose": ([_signed((2, 4, 4, 5)), _signed((4, 3, 3, 3)), _signed((6,))],
                       lambda lib, x, w, b: (lib.nn.functional.conv_transpose2d(
                           x * x, w * w, b, stride=(2, 1), padding=1, output_padding=(1, 0), dilation=(1, 2), groups=2)
                           ** 2).sum()
                       + (lib.nn.functional.conv_transpose2d(x[1].exp(), w[:, :2], b[:2], stride=2) ** 3).sum()),
    "pooling": ([_signed((2, 3, 6, 5))],
                lambda lib, x: (lib.nn.functional.max_pool2d(x * x, 2, stride=1, padding=1) ** 2).sum()
                + (lib.nn.functional.avg_pool2d(x.exp(), 3, stride=2, padding=1, count_include_pad=False) ** 2).sum()
                + (lib.nn.functional.adaptive_avg_pool2d(x[0] ** 3, (4, 3)) ** 2).sum()),
    "gather_index_select": ([_signed((4, 5))],
                            lambda lib, x: (lib.gather(x * x, 1, lib.tensor([[0, 0, 4], [1, 2, 3], [4, 4, 4], [2, 1, 0]]))
                                            ** 2).sum()
                            + (lib.index_select(x.exp(), 0, lib.tensor([3, 0, 3])) ** 2).sum()),
    "embedding": ([_signed((6, 3))],
                  lambda lib, w: (lib.nn.functional.embedding(lib.tensor([[0, 5, 2], [2, 2, 1]]), w * w, padding_idx=2)
                                  ** 3).sum()),
    "batch_norm": ([_signed((4, 3, 2, 2)), _positive((3,)), _signed((3,))],
                   lambda lib, x, w, b: (lib.nn.functional.batch_norm(
                       x * x, lib.zeros(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64), w, b, training=True)
                       ** 3).sum()
                   + (lib.nn.functional.batch_norm(x, lib.tensor([0.1, -0.2, 0.3], dtype=lib.float64),
                                                   lib.tensor([0.5, 2.0, 1.5], dtype=lib.float64), w * w, b,
                                                   training=False) ** 3).sum()),
    "attention": ([_signed((2, 2, 3, 4)), _signed((2, 2, 5, 4)), _signed((2, 2, 5, 3)), _signed((3, 5))],
                  lambda lib, q, k, v, bias: (lib.nn.functional.scaled_dot_product_attention(q, k * k, v, attn_mask=bias)
                                              ** 2).sum()
                  + (lib.nn.functional.scaled_dot_product_attention(q, k, v.exp(), is_causal=True, scale=0.3) ** 3).sum()
                  + (lib.nn.functional.scaled_dot_product_attention(
                      q, k, v, attn_mask=lib.tensor([[True] * 5, [True, False] * 2 + [True], [False] * 4 + [True]]))
                     ** 2).sum()),
    "var_std_logsumexp": ([_signed((3, 4, 2))],
                          lambda lib, x: (lib.var(x * x, dim=(0, 2)) ** 2).sum()
                          + (lib.std(x.exp(), dim=1, keepdim=True, correction=0) ** 3).sum()
                          + (x.std() * lib.logsumexp(x * x, dim=2)).sum()
                          + (lib.logsumexp(x, dim=(0, 1), keepdim=True) ** 2).sum()),
    "linear_maps": ([_signed((3, 5))],
                    lambda lib, x: (lib.cumsum(x * x, dim=1) ** 2).sum()
                    + (lib.flip(x.exp(), dims=(0,)) * x).sum()
                    + (lib.roll(x * x, shifts=(1, -2), dims=(0, 1)) * x).sum()
                    + (lib.nn.functional.pad(x * x, (1, 2, 0, 1), value=0.5) ** 3).sum()),
    "pad_modes": ([_signed((2, 3, 4, 5))],
                  lambda lib, x: (lib.nn.functional.pad(x * x, (2, 1, 0, 3), mode="reflect") ** 3).sum()
                  + (lib.nn.functional.pad(x.exp(), (1, 2, 3, 0), mode="replicate") ** 2 * 0.5).sum()
                  + (lib.nn.functional.pad(x[0] * x[1], (2, 1), mode="circular") ** 3).sum()
                  + (lib.nn.functional.pad(x[None] ** 2, (1, 0, 4, 2, 0, 1), mode="circular") ** 2).sum()),
    # zeros: none in a row, one, several; PyTorch's formulas differ between these cases
    "prod_cumprod": ([np.array([[0.5, -1.2, 0.0, 2.0], [1.5, 0.0, 0.0, -0.7], [0.3, 0.9, -1.1, 1.3]])],
                     lambda lib, x: (lib.prod(x, 1) ** 2).sum() + (x.prod(0, keepdim=True) * x[0]).sum()
                     + x.prod() + (x + 1.0).prod() + (x[0] * x[0]).prod()
                     + (lib.cumprod(x, 1) * x.exp()).sum() + (lib.cumprod(x * x, 0) ** 2).sum()
                     + (lib.cumprod(x[2], 0) * x[1]).sum()),
    "maximum_minimum": ([_signed((4, 3)), _signed((3,))],
                        lambda lib, a, b: (lib.maximum(a * a, b) ** 2).sum()
                        + (lib.minimum(a, b.exp()) * a).sum()),
    "self_attention": ([_signed((3, 2, 4)), _signed((12, 4)) * 0.5, _signed((12,)), _signed((4, 4))],
                       _self_attention),
    "log_softmax_nll": ([_signed((4, 5))],
                        lambda lib, z: lib.nn.functional.nll_loss(
                            lib.log_softmax(z * z, dim=1), lib.tensor([1, 0, 4, 4]))
                        + (lib.softmax(z, dim=0) ** 2).sum()),
}


def _dropout_case(lib, a):
    lib.manual_seed(11)  # the same mask at every evaluation
    return (lib.nn.functional.dropout(a * a, p=0.4) ** 2).sum()


# checked against finite differences only: randomness differs between the libraries, or torch
# does not differentiate the op twice (its CPU flash attention, which grouped heads take)
OWN_CASES = {
    "attention_grouped_heads": ([_signed((1, 4, 3, 2)), _signed((1, 2, 4, 2)), _signed((1, 2, 4, 2))],
                                lambda lib, q, k, v: (lib.nn.functional.scaled_dot_product_attention(
                                    q, k, v, enable_gqa=True) ** 3).sum()),
    "dropout": ([_signed((4, 6))], _dropout_case),
    "attention_row_sees_nothing": ([_signed((1, 1, 2, 3)), _signed((1, 1, 3, 3)), _signed((1, 1, 3, 2))],
                                   lambda lib, q, k, v: (lib.nn.functional.scaled_dot_product_attention(
                                       q, k, v, attn_mask=lib.tensor([[True, False, True], [False] * 3])) ** 2).sum()),
}


def _hessian_vector(lib, name):
    arrays, function = {**CASES, **OWN_CASES}[name]
    params = [_param(lib, a) for a in arrays]
    vectors = [lib.tensor(np.cos(np.arange(a.size) + 1.0).reshape(a.shape), dtype=lib.float64) for a in arrays]
    grads = lib.autograd.grad(function(lib, *params), params, create_graph=True)
    product = sum((g * v).sum() for g, v in zip(grads, vectors))
    second = lib.autograd.grad(product, params)
    return [g.detach().cpu().numpy() for g in grads], [h.cpu().numpy() for h in second]


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("name", sorted(CASES))
def test_hessian_vector_product_matches_pytorch(name):
    ours, theirs = _hessian_vector(zgrad, name), _hessian_vector(torch, name)
    for mine, reference in zip(ours[0] + ours[1], theirs[0] + theirs[1]):
        np.testing.assert_allclose(mine, reference, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", ["arithmetic", "mlp_mse", "cross_entropy", "layout", "norms", "dropout", "attention",
                                  "attention_row_sees_nothing", "attention_grouped_heads", "conv_weight",
                                  "conv_transpose", "cross_entropy_weight_smoothing", "prod_cumprod",
                                  "self_attention"])
def test_hessian_vector_product_matches_finite_differences(name):
    arrays, function = {**CASES, **OWN_CASES}[name]
    vectors = [np.cos(np.arange(a.size) + 1.0).reshape(a.shape) for a in arrays]
    _, second = _hessian_vector(zgrad, name)

    def first_gradient(shifted):
        params = [_param(zgrad, a) for a in shifted]
        return [g.numpy() for g in zgrad.autograd.grad(function(zgrad, *params), params)]

    step = 1e-6  # the Hessian-vector product is the derivative of the gradient along v
    plus = first_gradient([a + step * v for a, v in zip(arrays, vectors)])
    minus = first_gradient([a - step * v for a, v in zip(arrays, vectors)])
    for h, p, m in zip(second, plus, minus):
        np.testing.assert_allclose(h, (p - m) / (2 * step), rtol=1e-5, atol=1e-6)


def test_third_derivative_and_grad_outputs_on_the_graph():
    x = _param(zgrad, [1.0, 2.0, -1.5])
    (d1,) = zgrad.autograd.grad((x ** 4).sum(), x, create_graph=True)
    (d2,) = zgrad.autograd.grad(d1.sum(), x, create_graph=True)
    (d3,) = zgrad.autograd.grad(d2.sum(), x)
    np.testing.assert_allclose(d1.detach().numpy(), 4 * x.detach().numpy() ** 3)
    np.testing.assert_allclose(d3.numpy(), 24 * x.detach().numpy())
    # x ** 3 differentiated four times at 0: its last step is the derivative of x ** 0 (0, not NaN)
    z = _param(zgrad, [0.0, 2.0])
    derivative = (z ** 3).sum()
    for _ in range(4):
        (derivative,) = zgrad.autograd.grad(derivative.sum(), z, create_graph=True)
    np.testing.assert_array_equal(derivative.detach().numpy(), [0.0, 0.0])
    # a grad_output that requires grad: the gradient depends on it (x * v summed: d/dv of v * 2x)
    v = _param(zgrad, [0.5, -1.0, 2.0])
    (gx,) = zgrad.autograd.grad(x * x, x, grad_outputs=v, create_graph=True)
    (gv,) = zgrad.autograd.grad(gx.sum(), v)
    np.testing.assert_allclose(gv.numpy(), 2 * x.detach().numpy())


def test_backward_with_create_graph_keeps_the_graph_in_grad_and_warns():
    x = _param(zgrad, [1.0, 3.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (x ** 3).sum().backward(create_graph=True)
    assert any("create a reference cycle" in str(w.message) for w in caught)
    assert x.grad.grad_fn is not None
    np.testing.assert_allclose(x.grad.detach().numpy(), [3.0, 27.0])
    (second,) = zgrad.autograd.grad(x.grad.sum(), x)
    np.testing.assert_allclose(second.numpy(), [6.0, 18.0])
    # a second accumulation adds out of place, still on the graph
    with pytest.warns(UserWarning, match="reference cycle"):
        zgrad.autograd.backward((x * x).sum(), create_graph=True)
    np.testing.assert_allclose(x.grad.detach().numpy(), [5.0, 33.0])
    assert x.grad.grad_fn is not None


def _critic(lib, convolutional):
    nn = lib.nn
    if convolutional:  # DCGAN's critic, small
        layers = [nn.Conv2d(2, 4, 3, stride=2, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(4, 4, 3, padding=1),
                  nn.GroupNorm(2, 4), nn.LeakyReLU(0.2), nn.Flatten(), nn.Linear(4 * 3 * 3, 1)]
    else:
        layers = [nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1)]
    critic = nn.Sequential(*layers).double()
    weights = np.random.default_rng(3)
    critic.load_state_dict({name: lib.tensor(weights.uniform(-1, 1, tuple(p.shape)), dtype=lib.float64)
                            for name, p in critic.state_dict().items()})
    return critic


def _gradient_penalty_grads(lib, convolutional):
    """WGAN-GP's penalty, (|d D(x) / dx| - 1)^2, differentiated with respect to D's weights."""
    critic = _critic(lib, convolutional)
    shape = (3, 2, 6, 6) if convolutional else (5, 3)
    x = lib.tensor(np.sin(np.arange(np.prod(shape))).reshape(shape), dtype=lib.float64, requires_grad=True)
    (gx,) = lib.autograd.grad(critic(x).sum(), x, grad_outputs=None, create_graph=True)
    ((gx.reshape(shape[0], -1).norm(2, dim=1) - 1) ** 2).mean().backward()
    return {name: p.grad for name, p in critic.named_parameters()}


def test_gradient_penalty_trains_the_critic():
    grads = _gradient_penalty_grads(zgrad, convolutional=False)
    assert grads["2.bias"] is None  # the input gradient does not depend on the last bias (as in torch)
    assert float(grads["0.weight"].abs().sum()) > 0 and float(grads["2.weight"].abs().sum()) > 0


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("convolutional", [False, True])
def test_gradient_penalty_matches_pytorch(convolutional):
    ours = _gradient_penalty_grads(zgrad, convolutional)
    theirs = _gradient_penalty_grads(torch, convolutional)
    ours_state = {k: torch.from_numpy(v.numpy()) for k, v in ours.items() if v is not None}
    assert sorted(ours_state) == sorted(k for k, v in theirs.items() if v is not None)
    for name, value in ours_state.items():
        np.testing.assert_allclose(value.numpy(), theirs[name].numpy(), rtol=1e-9, atol=1e-12)


def test_user_function_backward_is_recorded():
    class Sine(zgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x.cos()  # written on tensors: recorded under create_graph

    x = _param(zgrad, [0.5, -1.0])
    (g,) = zgrad.autograd.grad(Sine.apply(x).sum(), x, create_graph=True)
    (h,) = zgrad.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), -np.sin([0.5, -1.0]))


def test_hooks_see_tensors_on_the_graph():
    x = _param(zgrad, [1.0, 2.0])
    y = x * x
    seen = []
    y.register_hook(lambda grad: seen.append(grad) or grad * 2)
    (g,) = zgrad.autograd.grad(y.sum(), x, create_graph=True)
    assert isinstance(seen[0], zgrad.Tensor)
    np.testing.assert_allclose(g.detach().numpy(), [4.0, 8.0])  # 2x, doubled by the hook
    (h,) = zgrad.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), [4.0, 4.0])


def test_op_without_a_differentiable_backward_names_itself():
    x = _param(zgrad, [[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(RuntimeError, match="LogCumSumExpBackward0: double backward \\(create_graph=True\\) is not "
                                           "implemented"):
        zgrad.autograd.grad(x.logcumsumexp(1).sum(), x, create_graph=True)
    # the same graph still differentiates once
    (g,) = zgrad.autograd.grad(x.logcumsumexp(1).sum(), x)
    e = np.exp(x.detach().numpy())  # exp(x_i) times the sum over k >= i of 1 / sum(exp(x_0..x_k))
    np.testing.assert_allclose(g.numpy(), e * np.cumsum((1 / np.cumsum(e, 1))[:, ::-1], 1)[:, ::-1])


def test_without_create_graph_gradients_have_no_graph():
    x = _param(zgrad, [1.0, 2.0])
    (g,) = zgrad.autograd.grad((x ** 3).sum(), x)
    assert g.grad_fn is None and not g.requires_grad


def _maml_meta_gradient(lib, inner_steps):
    """MAML on a tiny conv net: ``inner_steps`` of SGD on a support batch, differentiated
    (create_graph), then the query loss of the adapted weights differentiated by the initial ones."""
    F = lib.nn.functional
    weights = np.random.default_rng(5)
    params = [_param(lib, weights.uniform(-0.6, 0.6, shape)) for shape in ((3, 2, 3, 3), (3,), (2, 12), (2,))]
    support, query = (lib.tensor(weights.normal(size=(4, 2, 4, 4)), dtype=lib.float64) for _ in range(2))
    labels = lib.tensor([0, 1, 1, 0])

    def net(p, x):
        conv_w, conv_b, linear_w, linear_b = p
        return F.linear(F.relu(F.conv2d(x, conv_w, conv_b, stride=2, padding=1)).flatten(1), linear_w, linear_b)

    fast = params
    for _ in range(inner_steps):
        grads = lib.autograd.grad(F.cross_entropy(net(fast, support), labels), fast, create_graph=True)
        fast = [p - 0.5 * g for p, g in zip(fast, grads)]
    return [g.numpy() for g in lib.autograd.grad(F.cross_entropy(net(fast, query), labels), params)]


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("inner_steps", [1, 2])
def test_maml_meta_gradient_of_a_conv_net_matches_pytorch(inner_steps):
    for mine, reference in zip(_maml_meta_gradient(zgrad, inner_steps), _maml_meta_gradient(torch, inner_steps)):
        np.testing.assert_allclose(mine, reference, rtol=1e-9, atol=1e-12)


MLP_ARRAYS = [_signed((4, 3)), _signed((5, 3)), _signed((5,)), _signed((2, 5))]


def _mlp_hessian_vector(device):
    params = [zgrad.tensor(a, dtype=zgrad.float64, device=device, requires_grad=True) for a in MLP_ARRAYS]
    x, w1, b1, w2 = params
    F = zgrad.nn.functional
    loss = F.mse_loss(F.linear(F.gelu(F.linear(x, w1, b1)), w2).softmax(dim=1),
                      zgrad.ones(4, 2, dtype=zgrad.float64, device=device))
    grads = zgrad.autograd.grad(loss, params, create_graph=True)
    product = sum((g * g.detach()).sum() for g in grads)
    return [h.cpu().numpy() for h in zgrad.autograd.grad(product, params)]


@requires_cuda
def test_hessian_vector_product_on_cuda_matches_cpu():
    for on_cuda, on_cpu in zip(_mlp_hessian_vector("cuda"), _mlp_hessian_vector("cpu")):
        np.testing.assert_allclose(on_cuda, on_cpu, rtol=1e-9, atol=1e-12)


@requires_cuda
@pytest.mark.parametrize("name", ["conv_small"] + [pytest.param(name, marks=pytest.mark.full)
                                                    for name in ("prod_cumprod", "cross_entropy_weight_smoothing")])
def test_hessian_vector_products_on_cuda_match_cpu(name):
    zgrad.set_default_device("cuda")
    try:
        on_cuda = _hessian_vector(zgrad, name)
    finally:
        zgrad.set_default_device("cpu")
    on_cpu = _hessian_vector(zgrad, name)
    for mine, reference in zip(on_cuda[0] + on_cuda[1], on_cpu[0] + on_cpu[1]):
        np.testing.assert_allclose(mine, reference, rtol=1e-9, atol=1e-11)
