"""``zgrad.autograd.gradcheck`` and ``gradgradcheck``: they pass on correct gradients (zgrad's ops, a
user Function) and fail, with PyTorch's messages, on wrong ones; their options, the warnings and
errors on inputs they cannot check, and the module layout PyTorch has. The tests marked ``torch``
run the same programs under PyTorch and compare results and message texts."""

from __future__ import annotations

import importlib
import sys
import warnings

import numpy as np
import pytest

import zgrad
from cuda_helpers import requires_cuda
from helpers import require_torch
from zgrad.autograd import gradcheck, gradgradcheck
from zgrad.autograd.gradcheck import GradcheckError

F = zgrad.nn.functional
RNG = np.random.default_rng(5)


def double(*shape, requires_grad=True):
    return zgrad.tensor(RNG.uniform(-1.0, 1.0, shape), dtype=zgrad.float64, requires_grad=requires_grad)


def functions(lib):
    """User Functions written once for zgrad and torch: right ones, and ones with a known bug."""

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 3 * x * x * grad

    class BadSquare(lib.autograd.Function):  # d(x^2)/dx written as 3x
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 3 * x * grad

    class PairBadSecond(lib.autograd.Function):  # (a * b, a + b): the gradient of the second wrt b is wrong
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b, a + b

        @staticmethod
        def backward(ctx, g_product, g_sum):
            a, b = ctx.saved_tensors
            return g_product * b + g_sum, g_product * a + 2 * g_sum

    class Noisy(lib.autograd.Function):  # a different gradient on every pass
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * (2 + lib.rand(grad.shape, dtype=grad.dtype) * 1e-3)

    class IgnoresGradOutput(lib.autograd.Function):  # right for grad_output 1 only
        @staticmethod
        def forward(ctx, x):
            return (x * 2).sum()

        @staticmethod
        def backward(ctx, grad):
            return lib.ones(3, dtype=lib.float64) * 2

    class CubeFirstOrderOnly(lib.autograd.Function):  # right gradient, detached: its derivative is 0
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 3 * (x * x).detach() * grad

    return Cube, BadSquare, PairBadSecond, Noisy, IgnoresGradOutput, CubeFirstOrderOnly


Cube, BadSquare, PairBadSecond, Noisy, IgnoresGradOutput, CubeFirstOrderOnly = functions(zgrad)

OPS = {
    "elementwise": (lambda x: (x.exp() * x.sin() + x.sigmoid()).tanh(), [(2, 3)]),
    "matmul": (lambda a, b: (a @ b).tanh(), [(3, 2), (2, 4)]),
    "linear": (lambda x, w, b: F.linear(x, w, b).relu() + F.linear(x, w), [(2, 3), (4, 3), (4,)]),
    "reductions": (lambda x: (x.sum(0), x.mean(), x.var(1), x.logsumexp(1)), [(3, 4)]),
    "softmax": (lambda x: F.log_softmax(x, dim=1) * F.softmax(x, dim=0), [(3, 4)]),
    "layout": (lambda x, y: zgrad.cat([x.t(), y], 0)[1:, ::2].reshape(-1), [(3, 2), (1, 3)]),
    "broadcast": (lambda x, y: x * y + x / (y * y + 1), [(3, 1), (1, 4)]),
    "mse_loss": (lambda x, t: F.mse_loss(x, t), [(5,), (5,)]),
}


@pytest.mark.parametrize("fast_mode", [False, True], ids=["slow", "fast"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_zgrad_ops_pass(name, fast_mode):
    func, shapes = OPS[name]
    assert gradcheck(func, tuple(double(*s) for s in shapes), fast_mode=fast_mode)


def test_a_right_function_passes_in_every_mode():
    x = double(4)
    assert gradcheck(Cube.apply, (x,))
    assert gradcheck(Cube.apply, x, fast_mode=True)  # a lone tensor is the one input
    assert gradcheck(Cube.apply, [x], check_batched_grad=True)


def test_a_wrong_backward_fails_with_pytorchs_message():
    x = zgrad.tensor([1.0, 2.0], dtype=zgrad.float64, requires_grad=True)
    with pytest.raises(GradcheckError) as caught:
        gradcheck(BadSquare.apply, (x,))
    assert isinstance(caught.value, RuntimeError)
    assert str(caught.value) == ("Jacobian mismatch for output 0 with respect to input 0,\n"
                                 "numerical:tensor([[2.0000, 0.0000],\n        [0.0000, 4.0000]], dtype=float64)\n"
                                 "analytical:tensor([[3., 0.],\n        [0., 6.]], dtype=float64)\n")


def test_the_message_names_the_failing_output_and_input():
    a, b = double(3), double(3)
    with pytest.raises(RuntimeError, match=r"^Jacobian mismatch for output 1 with respect to input 1,\nnumerical:"):
        gradcheck(PairBadSecond.apply, (a, b))
    # the first argument does not require grad: the second is input 0 of the check
    with pytest.raises(RuntimeError, match=r"^Jacobian mismatch for output 1 with respect to input 0,"):
        gradcheck(PairBadSecond.apply, (a.detach(), b))


def test_raise_exception_false_returns_false_but_other_errors_still_raise():
    x = double(3)
    assert gradcheck(BadSquare.apply, (x,), raise_exception=False) is False
    assert gradcheck(BadSquare.apply, (x,), raise_exception=False, fast_mode=True) is False
    assert gradcheck(Cube.apply, (x,), raise_exception=False) is True
    with pytest.raises(ValueError, match="gradcheck expects at least one input tensor to require gradient, but none "
                                         "of them have requires_grad=True."):
        gradcheck(Cube.apply, (x.detach(),), raise_exception=False)


def test_fast_mode_reports_the_whole_jacobians_and_leaves_the_rng_alone():
    x = zgrad.tensor([1.0, 2.0], dtype=zgrad.float64, requires_grad=True)
    state = zgrad.get_rng_state()
    with pytest.raises(RuntimeError) as caught:
        gradcheck(BadSquare.apply, (x,), fast_mode=True)
    message = str(caught.value)
    assert message.startswith("Jacobian mismatch for output 0 with respect to input 0,\nnumerical:")
    assert "Numerical:\n tensor([[2.0000, 0.0000],\n        [0.0000, 4.0000]], dtype=float64)" in message
    assert "Analytical:\ntensor([[3., 0.],\n        [0., 6.]], dtype=float64)" in message
    assert "The max per-element difference (slow mode) is: 1.99999" in message
    assert zgrad.equal(zgrad.get_rng_state(), state)
    with pytest.raises(RuntimeError) as again:
        gradcheck(BadSquare.apply, (x,), fast_mode=True)
    assert str(again.value) == message  # the same projections every time


def test_backward_that_differs_between_passes_fails_unless_nondet_tol_allows_it():
    x = double(3)
    with pytest.raises(RuntimeError, match="Backward is not reentrant, i.e., running backward with same input and "
                                           "grad_output multiple times gives different values"):
        gradcheck(Noisy.apply, (x,))
    assert gradcheck(Noisy.apply, (x,), nondet_tol=1e-2, atol=1e-2)


def test_backward_must_scale_with_grad_output():
    with pytest.raises(RuntimeError, match="^backward not multiplied by grad_output$"):
        gradcheck(IgnoresGradOutput.apply, (double(3),))


def test_float32_inputs_warn_at_the_callers_line():
    x = zgrad.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert gradcheck(lambda a: a * 2, (x,), eps=1e-3, atol=1e-2, rtol=1e-2)
    assert [str(w.message) for w in caught] == [
        "Input #0 requires gradient and is not a double precision floating point or complex. This check will likely "
        "fail if all the inputs are not of double precision floating point or complex. "]
    assert caught[0].filename == __file__


def test_inputs_that_are_not_checked_pass_through():
    x, y = double(2, 3), double(3, requires_grad=False)
    index = zgrad.tensor([2, 0])
    assert gradcheck(lambda a, b, i, k, none: (a * b)[:, i] * k, (x, y, index, 2.5, None))


def test_outputs_that_do_not_require_grad_are_skipped():
    x = double(4)
    assert gradcheck(lambda a: (a.argmax(), a.exp(), (a * 2).detach() * 0, a.sin()), (x,))


def test_a_function_without_differentiable_outputs():
    x = double(3)
    assert gradcheck(lambda a: zgrad.ones(2, dtype=zgrad.float64), (x,))
    for fast_mode in (False, True):
        with pytest.raises(RuntimeError, match="^Numerical gradient for function expected to be zero$"):
            gradcheck(lambda a: (a * 2).detach(), (x,), fast_mode=fast_mode)


def test_empty_and_zero_dimensional_tensors():
    empty, scalar = double(0), zgrad.tensor(0.5, dtype=zgrad.float64, requires_grad=True)
    for fast_mode in (False, True):
        assert gradcheck(lambda a, b: (a * b, b.exp()), (empty, scalar), fast_mode=fast_mode, check_batched_grad=True)


def test_the_inputs_come_back_unchanged_and_their_graphs_usable():
    x = double(3)
    before = x.detach().clone()
    y = (x * x).sum()  # saves x: the perturbations must not count as in-place changes
    assert gradcheck(lambda a: a.exp() * a, (x,))
    assert zgrad.equal(x.detach(), before)
    y.backward()
    assert zgrad.allclose(x.grad, 2 * before)


class UndefinedAware(zgrad.autograd.Function):
    """Two outputs, gradients not materialized: it handles None, but wrongly gives a gradient when
    the first output has none and the second a zero one."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g_first, g_second):
        if g_first is None:
            return g_second * 3 + (1.0 if not g_second.abs().sum().item() else 0.0)
        return g_first * 2 if g_second is None else g_first * 2 + g_second * 3


def test_output_gradients_that_never_arrive():
    x = double(3)
    with pytest.raises(RuntimeError, match="^Expected all input grads to be undefined or zero when all output grads "
                                           "are undefined or zero.$"):
        gradcheck(UndefinedAware.apply, (x,))
    assert gradcheck(UndefinedAware.apply, (x,), check_undefined_grad=False)


def test_refused_inputs():
    with pytest.raises(RuntimeError, match="The 0th input has a dimension with stride 0. gradcheck only supports "
                                           "inputs that are non-overlapping"):
        gradcheck(lambda a: a * 2, (zgrad.ones(1, dtype=zgrad.float64).expand(3).requires_grad_(),))
    sparse = zgrad.eye(2, dtype=zgrad.float64).to_sparse().requires_grad_()
    with pytest.raises(NotImplementedError, match="input 0 is a sparse tensor"):
        gradcheck(lambda s: s.to_dense() * 2, (sparse,))


@pytest.mark.parametrize("option", ["check_forward_ad", "check_batched_forward_grad"])
def test_forward_mode_options_are_refused_by_name(option):
    options = {option: True, "check_forward_ad": True}
    with pytest.raises(NotImplementedError, match=f"gradcheck\\({option}=True\\): zgrad has no forward-mode AD"):
        gradcheck(Cube.apply, (double(2),), **options)


def test_contradicting_options_are_refused_as_pytorch_refuses_them():
    x = double(2)
    with pytest.raises(AssertionError, match="Expected at least one of check_forward_ad or check_backward_ad"):
        gradcheck(Cube.apply, (x,), check_backward_ad=False)
    with pytest.raises(AssertionError, match="check_batched_forward_grad=True requires check_forward_ad"):
        gradcheck(Cube.apply, (x,), check_batched_forward_grad=True)
    with pytest.raises(AssertionError, match="check_undefined_grad=True requires check_rev_over_rev"):
        gradgradcheck(Cube.apply, (x,), check_rev_over_rev=False, check_fwd_over_rev=True)
    with pytest.raises(NotImplementedError, match="check_fwd_over_rev=True"):
        gradgradcheck(Cube.apply, (x,), check_fwd_over_rev=True)


@requires_cuda
def test_cuda_inputs_are_perturbed_and_checked_on_the_device():
    x = zgrad.tensor(RNG.uniform(-1.0, 1.0, (2, 3)), dtype=zgrad.float64, device="cuda", requires_grad=True)
    before = x.detach().cpu()
    assert gradcheck(lambda a: (a * a).sin(), (x,))
    assert gradcheck(lambda a: (a * a).sin(), (x,), fast_mode=True, check_batched_grad=True)
    assert gradgradcheck(lambda a: (a * a).sin(), (x,))
    assert zgrad.equal(x.detach().cpu(), before)
    with pytest.raises(GradcheckError, match="^Jacobian mismatch for output 0 with respect to input 0,"):
        gradcheck(BadSquare.apply, (x,))


# --- gradgradcheck -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["elementwise", "matmul", "softmax", "broadcast"])
def test_gradgradcheck_passes_on_zgrad_ops(name):
    func, shapes = OPS[name]
    assert gradgradcheck(func, tuple(double(*s) for s in shapes))


def test_gradgradcheck_on_a_function_with_a_differentiable_backward():
    x = double(2, 3)
    assert gradgradcheck(Cube.apply, (x,))
    assert gradgradcheck(Cube.apply, (x,), (double(2, 3),))  # given grad_outputs, checked too
    assert gradgradcheck(Cube.apply, (x,), (double(2, 3, requires_grad=False),), fast_mode=True)
    assert gradgradcheck(Cube.apply, (x,), gen_non_contig_grad_outputs=True, check_batched_grad=True)


def test_gradgradcheck_catches_a_backward_that_is_right_only_to_first_order():
    x = double(3)
    assert gradcheck(CubeFirstOrderOnly.apply, (x,))
    with pytest.raises(RuntimeError, match=r"^Jacobian mismatch for output 0 with respect to input 0,\nnumerical:"):
        gradgradcheck(CubeFirstOrderOnly.apply, (x,))
    assert gradgradcheck(CubeFirstOrderOnly.apply, (x,), raise_exception=False) is False


def test_random_grad_outputs_come_from_zgrads_generator():
    x = double(3)

    def failure(seed):
        zgrad.manual_seed(seed)
        with pytest.raises(GradcheckError) as caught:
            gradgradcheck(CubeFirstOrderOnly.apply, (x,), gen_non_contig_grad_outputs=True)
        return str(caught.value)

    assert failure(3) == failure(3) != failure(4)  # the numerical Jacobian depends on the grad_outputs drawn


# --- the module layout -----------------------------------------------------------------------------

def test_the_names_resolve_as_pytorchs():
    module = sys.modules["zgrad.autograd.gradcheck"]
    assert zgrad.autograd.gradcheck is gradcheck is module.gradcheck
    assert zgrad.autograd.gradgradcheck is gradgradcheck is module.gradgradcheck
    assert importlib.import_module("zgrad.autograd.gradcheck") is module
    assert set(module.__all__) == {"GradcheckError", "gradcheck", "gradgradcheck"}
    assert issubclass(module.GradcheckError, RuntimeError)
    assert GradcheckError is module.GradcheckError


# --- against PyTorch ---------------------------------------------------------------------------

def _outcome(lib, check, func, inputs, **options):
    try:
        return check(func, inputs, **options)
    except RuntimeError as exc:  # GradcheckError
        return type(exc).__name__, str(exc).replace("torch.", "")


@pytest.mark.torch
def test_results_and_messages_agree_with_pytorchs():
    torch = require_torch()
    values = RNG.uniform(0.5, 1.5, (2, 3))
    outcomes = {}
    for lib in (zgrad, torch):
        cube, bad, pair, _, ignores, first_order = functions(lib)
        x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
        y = lib.tensor(values[0], dtype=lib.float64, requires_grad=True)
        gc = sys.modules[f"{lib.__name__}.autograd.gradcheck"]
        outcomes[lib.__name__] = [
            _outcome(lib, gc.gradcheck, cube.apply, (x,)),
            _outcome(lib, gc.gradcheck, bad.apply, (x,)),
            _outcome(lib, gc.gradcheck, pair.apply, (y, y * 1.5)),
            _outcome(lib, gc.gradcheck, pair.apply, (y, y.detach())),
            _outcome(lib, gc.gradcheck, ignores.apply, (y,)),
            _outcome(lib, gc.gradcheck, bad.apply, (x,), raise_exception=False),
            _outcome(lib, gc.gradcheck, lambda a: (a * 2).detach(), (x,)),
            _outcome(lib, gc.gradgradcheck, cube.apply, (x,)),
            _outcome(lib, gc.gradgradcheck, first_order.apply, (x,), raise_exception=False),
            _outcome(lib, gc.gradcheck, lambda a, b: (a @ b.t()).tanh(), (x, y.reshape(1, 3)), fast_mode=True),
        ]
    assert outcomes["zgrad"] == outcomes["torch"]


@pytest.mark.torch
def test_warnings_and_input_errors_agree_with_pytorchs():
    torch = require_torch()
    texts = {}
    for lib in (zgrad, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert lib.autograd.gradcheck(lambda a: a * 2, (lib.ones(2, requires_grad=True),), eps=1e-3, atol=1e-2,
                                          rtol=1e-2)
        errors = []
        for inputs in [(lib.ones(2, dtype=lib.float64),), (lib.ones(1, dtype=lib.float64).expand(3).requires_grad_(),)]:
            with pytest.raises((ValueError, RuntimeError)) as caught_error:
                lib.autograd.gradcheck(lambda a: a * 2, inputs)
            errors.append((type(caught_error.value).__name__, str(caught_error.value)))
        texts[lib.__name__] = ([str(w.message) for w in caught], errors)
    assert texts["zgrad"] == texts["torch"]
