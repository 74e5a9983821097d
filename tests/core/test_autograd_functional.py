"""``zgrad.autograd.functional`` (vjp, jvp, jacobian, hessian, vhp, hvp) against PyTorch's.

Each function is written once for both libraries (``lib`` is ``zgrad`` or ``torch``), in float64.
With torch: results, their structure (tuple or tensor), whether they require grad, their second
derivatives under ``create_graph=True``, and every error text are compared with PyTorch's. Without
torch: results against finite differences and closed forms, errors against PyTorch's texts
written out here (the torch test checks that PyTorch raises exactly those).
"""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import error_of, torch

RNG = np.random.default_rng(17)


def _mlp(lib, x, w1, b1, w2):
    return lib.tanh(x @ w1.T + b1) @ w2.T


# name -> (input shapes, pass the inputs as a tuple, func(lib, *inputs))
FUNCTIONS = {
    "single": ([(2, 3)], False, lambda lib, x: x.exp() * x.sin() + x.sum()),
    "one_tuple": ([(3,)], True, lambda lib, x: (x.tanh() * x,)),
    "tuple_to_tuple": ([(3,), (2,)], True, lambda lib, x, y: (x * y.sum(), (x ** 2).sum() * y.tanh())),
    "tuple_to_single": ([(2, 2), (2,)], True, lambda lib, a, b: (a @ b).sigmoid()),
    "single_to_tuple": ([(3,)], False, lambda lib, x: (x.tanh(), (x * x).sum())),
    "mlp": ([(4, 3), (5, 3), (5,), (2, 5)], True, _mlp),
    "unused_input": ([(2,), (3,)], True, lambda lib, x, y: x * 2.0 + x ** 2),
}
# functions returning one element, for hessian, vhp and hvp
SCALARS = {
    "cubic": ([(3,)], False, lambda lib, x: (x ** 3).sum() + x[0] * x[1] * x[2]),
    "mlp_loss": ([(4, 3), (5, 3), (5,), (2, 5)], True, lambda lib, *args: (_mlp(lib, *args) ** 2).mean()),
    "unused_input": ([(2,), (2,)], True, lambda lib, x, y: (x ** 3).sum()),
    "shape_1": ([(2, 2)], False, lambda lib, x: (x.exp() * x).sum().reshape(1)),
}
# (table, name) -> (input arrays, as a tuple, func); "f" FUNCTIONS, "s" SCALARS
CASES = {(table, name): ([RNG.uniform(-1.2, 1.2, shape) for shape in shapes], as_tuple, fn)
         for table, functions in (("f", FUNCTIONS), ("s", SCALARS))
         for name, (shapes, as_tuple, fn) in functions.items()}


def _tensors(lib, arrays, as_tuple, requires_grad=False):
    tensors = tuple(lib.tensor(a, dtype=lib.float64, requires_grad=requires_grad) for a in arrays)
    return tensors if as_tuple else tensors[0]


def _leaves(result):
    """The tensors of a nested tuple, in order."""
    return [t for part in result for t in _leaves(part)] if isinstance(result, tuple) else [result]


def _assert_same(ours, theirs, compare_requires_grad=True):
    """Same nesting (tuple or tensor), shapes, dtypes, values and requires_grad as torch's result."""
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs), f"{type(ours)} where torch gives a tuple"
        for mine, reference in zip(ours, theirs):
            _assert_same(mine, reference, compare_requires_grad)
        return
    assert isinstance(ours, zgrad.Tensor), f"{type(ours)} where torch gives a tensor"
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.dtype == np.float64 and theirs.dtype == torch.float64
    assert ours.requires_grad == theirs.requires_grad or not compare_requires_grad
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)


def _weighted_sum(lib, result):
    """A scalar of every element of ``result``, with fixed weights, to differentiate again."""
    return sum((t * _vector(lib, t)).sum() for t in _leaves(result))


def _functional(lib):
    return lib.autograd.functional


# --- against PyTorch ------------------------------------------------------------------------------

requires_torch = pytest.mark.skipif(torch is None, reason="needs torch")

JACOBIAN_MODES = {"plain": {}, "create_graph": {"create_graph": True}, "vectorize": {"vectorize": True},
                  "forward_mode": {"vectorize": True, "strategy": "forward-mode"}}


@pytest.mark.torch
@requires_torch
@pytest.mark.parametrize("mode", sorted(JACOBIAN_MODES))
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_jacobian_matches_pytorch(name, mode):
    arrays, as_tuple, fn = CASES["f", name]
    ours, theirs = [_functional(lib).jacobian(lambda *a, lib=lib: fn(lib, *a), _tensors(lib, arrays, as_tuple),
                                              **JACOBIAN_MODES[mode]) for lib in (zgrad, torch)]
    _assert_same(ours, _as_tuples(theirs), compare_requires_grad=mode != "forward_mode")


def _as_tuples(result):
    """PyTorch's forward mode nests its Jacobians in lists where reverse mode uses tuples, and
    leaves them on the graph when the inputs require grad (hessian's outer forward mode makes them
    so); zgrad gives detached tensors in tuples either way."""
    return tuple(_as_tuples(part) for part in result) if isinstance(result, (list, tuple)) else result


HESSIAN_MODES = {"plain": {}, "create_graph": {"create_graph": True}, "vectorize": {"vectorize": True},
                 "forward_outer": {"vectorize": True, "outer_jacobian_strategy": "forward-mode"}}


@pytest.mark.torch
@requires_torch
@pytest.mark.parametrize("mode", sorted(HESSIAN_MODES))
@pytest.mark.parametrize("name", sorted(SCALARS))
def test_hessian_matches_pytorch(name, mode):
    arrays, as_tuple, fn = CASES["s", name]
    ours, theirs = [_functional(lib).hessian(lambda *a, lib=lib: fn(lib, *a), _tensors(lib, arrays, as_tuple),
                                             **HESSIAN_MODES[mode]) for lib in (zgrad, torch)]
    _assert_same(ours, _as_tuples(theirs), compare_requires_grad=mode != "forward_outer")


def _vector(lib, like, requires_grad=False):
    """A fixed vector shaped as ``like`` (a tensor or a tuple), of the library ``lib``."""
    if isinstance(like, tuple):
        return tuple(_vector(lib, t, requires_grad) for t in like)
    array = np.sin(np.arange(like.numel()) * 1.3 + 0.2).reshape(tuple(like.shape))
    return lib.tensor(array, dtype=lib.float64, requires_grad=requires_grad)


def _product(lib, which, case, create_graph, inputs_require_grad, v_requires_grad=False):
    """``(inputs, v, (func's output, product))`` of ``which`` (vjp, jvp, vhp or hvp) on a case."""
    arrays, as_tuple, fn = CASES[case]
    inputs = _tensors(lib, arrays, as_tuple, requires_grad=inputs_require_grad)
    func = lambda *a: fn(lib, *a)  # noqa: E731
    with lib.no_grad():
        v_like = func(*_tensors(lib, arrays, True)) if which == "vjp" else inputs
    v = _vector(lib, v_like, v_requires_grad)
    result = getattr(_functional(lib), which)(func, inputs, v, create_graph=create_graph)
    return inputs, v, result


PRODUCT_CASES = [pytest.param(which, (table, name), id=f"{which}-{name}")
                 for which, table in (("vjp", "f"), ("jvp", "f"), ("vhp", "s"), ("hvp", "s"))
                 for name in sorted(FUNCTIONS if table == "f" else SCALARS)]


@pytest.mark.torch
@requires_torch
@pytest.mark.parametrize("create_graph, inputs_require_grad", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("which, case", PRODUCT_CASES)
def test_products_match_pytorch(which, case, create_graph, inputs_require_grad):
    ours, theirs = (_product(lib, which, case, create_graph, inputs_require_grad)[2] for lib in (zgrad, torch))
    _assert_same(ours, theirs)


SECOND_ORDER = [pytest.param(which, (table, name), id=f"{which}-{name}")
                for which, table, name in (("vjp", "f", "mlp"), ("vjp", "f", "tuple_to_tuple"), ("jvp", "f", "mlp"),
                                           ("jvp", "f", "single_to_tuple"), ("vhp", "s", "mlp_loss"),
                                           ("hvp", "s", "mlp_loss"), ("hvp", "s", "cubic"))]


@pytest.mark.torch
@requires_torch
@pytest.mark.parametrize("which, case", SECOND_ORDER)
def test_products_with_create_graph_differentiate_again_like_pytorch(which, case):
    """The product keeps the graph to the inputs and to ``v``: its gradients match PyTorch's."""
    grads = []
    for lib in (zgrad, torch):
        inputs, v, (output, product) = _product(lib, which, case, True, True, v_requires_grad=True)
        leaves = _leaves(inputs) + _leaves(v)
        objective = _weighted_sum(lib, product) + _weighted_sum(lib, output)
        grads.append(lib.autograd.grad(objective, leaves, allow_unused=True, materialize_grads=True))
    _assert_same(*grads)


@pytest.mark.torch
@requires_torch
@pytest.mark.parametrize("which, case", [pytest.param(which, (table, name), id=f"{which}-{name}")
                                         for which, table, name in (("jacobian", "f", "mlp"),
                                                                    ("jacobian", "f", "tuple_to_tuple"),
                                                                    ("hessian", "s", "mlp_loss"),
                                                                    ("hessian", "s", "cubic"))])
def test_jacobian_and_hessian_with_create_graph_differentiate_again_like_pytorch(which, case):
    arrays, as_tuple, fn = CASES[case]
    grads = []
    for lib in (zgrad, torch):
        inputs = _tensors(lib, arrays, as_tuple, requires_grad=True)
        result = getattr(_functional(lib), which)(lambda *a, lib=lib: fn(lib, *a), inputs, create_graph=True)
        grads.append(lib.autograd.grad(_weighted_sum(lib, result), _leaves(inputs)))
    _assert_same(*grads)


# --- errors: PyTorch's types and texts --------------------------------------------------------------

def _x(lib, n=3):
    return lib.linspace(0.5, 1.5, n, dtype=lib.float64)


def _external(lib):
    """A leaf from outside the inputs that requires grad."""
    return lib.ones(3, dtype=lib.float64, requires_grad=True)


_STRICT_OUTPUT = ("Output 0 of the user-provided function does not require gradients. The outputs must be computed "
                  "in a differentiable manner from the input when running in strict mode.")
_VJP_V_NONE = ("The vector v can only be None if the user-provided function returns a single Tensor with a single "
               "element.")
_V_NONE = ("The vector v can only be None if the input to the user-provided function is a single Tensor with a "
           "single element.")
_HESSIAN_OF_LINEAR = ("While computing the hessian, found that the jacobian of the user-provided function with "
                      "respect to input {} is independent of the input. This is not allowed in strict mode. You "
                      "should ensure that your function is twice differentiable and that the jacobian depends on the "
                      "inputs (this would be violated by a linear function for example).")
_UNUSED = "The output of the user-provided function is independent of input {}. This is not allowed in strict mode."
_FORWARD_WITHOUT_VECTORIZE = ("Computing Jacobian using forward-AD or forward-over-reverse Hessian isonly implemented "
                              "for `vectorize=True`.")

# name -> (call(functional, lib), the builtin type PyTorch raises, its message)
ERRORS = {
    "inputs_list": (lambda F, lib: F.vjp(lambda x: x, [_x(lib)]), TypeError,
                    "The inputs given to vjp must be either a Tensor or a tuple of Tensors but the given inputs has "
                    "type <class 'list'>."),
    "inputs_tuple_element": (lambda F, lib: F.jacobian(lambda x, y: x, (_x(lib), 1.0)), TypeError,
                             "The inputs given to jacobian must be either a Tensor or a tuple of Tensors but the "
                             "value at index 1 has type <class 'float'>."),
    "outputs_list": (lambda F, lib: F.jvp(lambda x: [x], _x(lib), _x(lib)), TypeError,
                     "The outputs of the user-provided function given to jvp must be either a Tensor or a tuple of "
                     "Tensors but the given outputs of the user-provided function has type <class 'list'>."),
    "outputs_tuple_element": (lambda F, lib: F.hessian(lambda x: (x.sum(), 2), _x(lib)), TypeError,
                              "The outputs of the user-provided function given to hessian must be either a Tensor or "
                              "a tuple of Tensors but the value at index 1 has type <class 'int'>."),
    "v_list": (lambda F, lib: F.vjp(lambda x: x * 2, _x(lib), [1.0, 2.0, 3.0]), TypeError,
               "The v given to vjp must be either a Tensor or a tuple of Tensors but the given v has type "
               "<class 'list'>."),
    "vjp_v_none": (lambda F, lib: F.vjp(lambda x: x * 2, _x(lib)), RuntimeError, _VJP_V_NONE),
    "jvp_v_none": (lambda F, lib: F.jvp(lambda x: x * 2, _x(lib)), RuntimeError, _V_NONE),
    "vhp_v_none": (lambda F, lib: F.vhp(lambda x: x.sum(), _x(lib)), RuntimeError, _V_NONE),
    "hvp_v_none": (lambda F, lib: F.hvp(lambda x: x.sum(), (_x(lib, 1), _x(lib, 1))), RuntimeError, _V_NONE),
    "v_count_tuple": (lambda F, lib: F.vjp(lambda x: (x, x * 2), _x(lib), (_x(lib),)), RuntimeError,
                      "v is a tuple of invalid length: should be 2 but got 1."),
    "v_count_single": (lambda F, lib: F.jvp(lambda x: x * 2, _x(lib), (_x(lib), _x(lib))), RuntimeError,
                       "The given v should contain a single Tensor."),
    "v_size_single": (lambda F, lib: F.vjp(lambda x: x * 2, _x(lib), _x(lib, 2)), RuntimeError,
                      "v has invalid size: should be zgrad.Size([3]) but got zgrad.Size([2])."),
    "v_size_tuple": (lambda F, lib: F.vhp(lambda x, y: (x * y).sum(), (_x(lib), _x(lib)), (_x(lib), _x(lib, 2))),
                     RuntimeError, "Entry 1 in v has invalid size: should be zgrad.Size([3]) but got zgrad.Size([2])."),
    "strict_constant_output": (lambda F, lib: F.vjp(lambda x: lib.ones(3, dtype=lib.float64), _x(lib), _x(lib),
                                                    strict=True), RuntimeError, _STRICT_OUTPUT),
    "strict_constant_output_jacobian": (lambda F, lib: F.jacobian(lambda x: x.detach(), _x(lib), strict=True),
                                        RuntimeError, _STRICT_OUTPUT),
    "strict_vjp_unused": (lambda F, lib: F.vjp(lambda x, y: x * 2, (_x(lib), _x(lib)), _x(lib), strict=True),
                          RuntimeError, _UNUSED.format(1)),
    "strict_vjp_linear_create_graph": (lambda F, lib: F.vjp(lambda x: x * 2, _x(lib), _x(lib), create_graph=True,
                                                            strict=True), RuntimeError,
                                       "The jacobian of the user-provided function is independent of input 0. This "
                                       "is not allowed in strict mode when create_graph=True."),
    "strict_jvp_unused": (lambda F, lib: F.jvp(lambda x, y: x * 2, (_x(lib), _x(lib)), (_x(lib), _x(lib)),
                                               strict=True), RuntimeError, _UNUSED.format(1)),
    "strict_jvp_output_off_the_inputs": (
        lambda F, lib: F.jvp(lambda x: (x ** 2, _external(lib).exp()), _x(lib), _x(lib), strict=True), RuntimeError,
        "The gradient with respect to the input is independent of entry 1 in the grad_outputs when using the double "
        "backward trick to compute forward mode gradients. This is not allowed in strict mode."),
    "strict_jacobian_unused": (lambda F, lib: F.jacobian(lambda x, y: x * 2, (_x(lib), _x(lib)), strict=True),
                               RuntimeError, "Output 0 of the user-provided function is independent of input 1. This "
                                             "is not allowed in strict mode."),
    # PyTorch names the output (1), not the input (0), here
    "strict_jacobian_linear_create_graph": (
        lambda F, lib: F.jacobian(lambda x, y: (x * y, x * 3 + y ** 2), (_x(lib), _x(lib)), create_graph=True,
                                  strict=True), RuntimeError,
        "The jacobian of the user-provided function is independent of input 1. This is not allowed in strict mode "
        "when create_graph=True."),
    "strict_hessian_unused": (lambda F, lib: F.hessian(lambda x, y: (x ** 3).sum(), (_x(lib), _x(lib)), strict=True),
                              RuntimeError, _HESSIAN_OF_LINEAR.format(1)),
    "strict_hessian_linear": (lambda F, lib: F.hessian(lambda x: (x * 2).sum(), _x(lib), strict=True), RuntimeError,
                              _HESSIAN_OF_LINEAR.format(0)),
    "strict_hessian_outer": (lambda F, lib: F.hessian(lambda x, y: (x ** 2 * y).sum(), (_x(lib), _x(lib)),
                                                      strict=True), RuntimeError,
                             "Output 1 of the user-provided function is independent of input 1. This is not allowed "
                             "in strict mode."),
    "strict_vhp_unused": (lambda F, lib: F.vhp(lambda x, y: (x ** 3).sum(), (_x(lib), _x(lib)), (_x(lib), _x(lib)),
                                               strict=True), RuntimeError, _UNUSED.format(1)),
    "strict_vhp_quadratic_create_graph": (
        lambda F, lib: F.vhp(lambda x: (x * x).sum(), _x(lib), _x(lib), create_graph=True, strict=True), RuntimeError,
        "The hessian of the user-provided function is independent of input 0. This is not allowed in strict mode "
        "when create_graph=True."),
    "strict_hvp_quadratic_create_graph": (
        lambda F, lib: F.hvp(lambda x: (x * x).sum(), _x(lib), _x(lib), create_graph=True, strict=True), RuntimeError,
        "The hessian of the user-provided function is independent of input 0. This is not allowed in strict mode "
        "when create_graph=True."),
    "strict_hvp_linear": (lambda F, lib: F.hvp(lambda x: (x * 2).sum(), _x(lib), _x(lib), strict=True), RuntimeError,
                          _HESSIAN_OF_LINEAR.format(0)),
    "jacobian_vectorize_strict": (lambda F, lib: F.jacobian(lambda x: x ** 2, _x(lib), vectorize=True, strict=True),
                                  RuntimeError, "torch.autograd.functional.jacobian: `strict=True` and "
                                                "`vectorized=True` are not supported together. Please either set "
                                                "`strict=False` or `vectorize=False`."),
    "forward_mode_create_graph": (lambda F, lib: F.jacobian(lambda x: x ** 2, _x(lib), create_graph=True,
                                                            strategy="forward-mode"), NotImplementedError,
                                  "torch.autograd.functional.jacobian: `create_graph=True` and "
                                  '`strategy="forward-mode"` are not supported together (yet). Please either set '
                                  '`create_graph=False` or `strategy="reverse-mode"`.'),
    "forward_mode_strict": (lambda F, lib: F.jacobian(lambda x: x ** 2, _x(lib), strict=True, vectorize=True,
                                                      strategy="forward-mode"), RuntimeError,
                            "torch.autograd.functional.jacobian: `strict=True` and `strategy=\"forward-mode\"` are "
                            "not supported together (yet). Please either set `strict=False` or "
                            "`strategy=\"reverse-mode\"`."),
    "forward_mode_without_vectorize": (lambda F, lib: F.jacobian(lambda x: x ** 2, _x(lib), strategy="forward-mode"),
                                       NotImplementedError, _FORWARD_WITHOUT_VECTORIZE),
    "forward_mode_checks_inputs_first": (lambda F, lib: F.jacobian(lambda x: x, [_x(lib)], strategy="forward-mode"),
                                         TypeError, "The inputs given to jacobian must be either a Tensor or a tuple "
                                                    "of Tensors but the given inputs has type <class 'list'>."),
    "hessian_forward_outer_without_vectorize": (
        lambda F, lib: F.hessian(lambda x: (x ** 3).sum(), _x(lib), outer_jacobian_strategy="forward-mode"),
        NotImplementedError, _FORWARD_WITHOUT_VECTORIZE),
    "jacobian_unknown_strategy": (lambda F, lib: F.jacobian(lambda x: x, _x(lib), strategy="fwd"), AssertionError,
                                  'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                                  'function has more outputs than inputs, "forward-mode" tends to be more performant. '
                                  'Otherwise, prefer to use "reverse-mode".'),
    "hessian_unknown_strategy": (lambda F, lib: F.hessian(lambda x: x.sum(), _x(lib), outer_jacobian_strategy="fwd"),
                                 AssertionError, 'Expected strategy to be either "forward-mode" or "reverse-mode".'),
    "hessian_tuple_output": (lambda F, lib: F.hessian(lambda x: (x.sum(),), _x(lib)), RuntimeError,
                             "The function given to hessian should return a single Tensor"),
    "hessian_many_elements": (lambda F, lib: F.hessian(lambda x: x * 2, _x(lib)), RuntimeError,
                              "The Tensor returned by the function given to hessian should contain a single element"),
    "vhp_tuple_output": (lambda F, lib: F.vhp(lambda x: (x.sum(), x.sum()), _x(lib), _x(lib)), RuntimeError,
                         "The function given to vhp should return a single Tensor"),
    "hvp_many_elements": (lambda F, lib: F.hvp(lambda x: x * 2, _x(lib), _x(lib)), RuntimeError,
                          "The Tensor returned by the function given to hvp should contain a single element"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_error(name):
    call, expected_type, message = ERRORS[name]
    with pytest.raises(expected_type) as caught:
        call(zgrad.autograd.functional, zgrad)
    assert str(caught.value) == message


@pytest.mark.torch
@requires_torch
@pytest.mark.parametrize("name", sorted(ERRORS))
def test_error_is_pytorchs(name):
    call, expected_type, message = ERRORS[name]
    assert error_of(lambda lib: call(lib.autograd.functional, lib), torch) == (expected_type.__name__, message)


def test_op_without_a_differentiable_backward_names_itself():
    with pytest.raises(RuntimeError, match="LogCumSumExpBackward0: double backward"):
        zgrad.autograd.functional.hessian(lambda x: x.logcumsumexp(0).sum(), _x(zgrad))


# --- without torch: finite differences and closed forms -------------------------------------------

def _fd_jacobian(evaluate, arrays, step=1e-6):
    """``J[i][j]`` of shape ``out_i.shape + in_j.shape`` by central differences, where
    ``evaluate(arrays)`` returns a tuple of arrays."""
    rows = [[np.zeros(out.shape + a.shape) for a in arrays] for out in evaluate(arrays)]
    for j, a in enumerate(arrays):
        for k in np.ndindex(a.shape):
            plus, minus = [x.copy() for x in arrays], [x.copy() for x in arrays]
            plus[j][k] += step
            minus[j][k] -= step
            for row, hi, lo in zip(rows, evaluate(plus), evaluate(minus)):
                row[j][(...,) + k] = (hi - lo) / (2 * step)
    return rows


def _values(fn):
    """``fn``'s outputs (zgrad, no graph) as a tuple of arrays, for :func:`_fd_jacobian`."""
    def evaluate(arrays):
        with zgrad.no_grad():
            outputs = fn(zgrad, *(zgrad.tensor(a) for a in arrays))
        return tuple(o.numpy() for o in (outputs if isinstance(outputs, tuple) else (outputs,)))
    return evaluate


def _gradient_values(fn):
    """The gradient of the scalar ``fn`` as a tuple of arrays, for :func:`_fd_jacobian`."""
    def evaluate(arrays):
        inputs = [zgrad.tensor(a, requires_grad=True) for a in arrays]
        grads = zgrad.autograd.grad(fn(zgrad, *inputs), inputs, allow_unused=True, materialize_grads=True)
        return tuple(g.numpy() for g in grads)
    return evaluate


def _rows(result, outputs_tuple, inputs_tuple):
    """A Jacobian or Hessian in the nesting of a tuple of tuples, checking the given one's."""
    if not inputs_tuple:
        assert isinstance(result, zgrad.Tensor if not outputs_tuple else tuple)
        result = tuple((r,) for r in result) if outputs_tuple else ((result,),)
    elif not outputs_tuple:
        assert isinstance(result, tuple) and isinstance(result[0], zgrad.Tensor)
        result = (result,)
    return [[block.numpy() for block in row] for row in result]


def _returns_tuple(fn, arrays):
    with zgrad.no_grad():
        return isinstance(fn(zgrad, *(zgrad.tensor(a) for a in arrays)), tuple)


FD_TOLERANCE = dict(rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_jacobian_matches_finite_differences(name, vectorize):
    arrays, as_tuple, fn = CASES["f", name]
    result = zgrad.autograd.functional.jacobian(lambda *a: fn(zgrad, *a), _tensors(zgrad, arrays, as_tuple),
                                                vectorize=vectorize)
    expected = _fd_jacobian(_values(fn), arrays)
    for row, reference_row in zip(_rows(result, _returns_tuple(fn, arrays), as_tuple), expected, strict=True):
        for block, reference in zip(row, reference_row, strict=True):
            np.testing.assert_allclose(block, reference, **FD_TOLERANCE)


@pytest.mark.parametrize("name", sorted(SCALARS))
def test_hessian_matches_finite_differences(name):
    arrays, as_tuple, fn = CASES["s", name]
    result = zgrad.autograd.functional.hessian(lambda *a: fn(zgrad, *a), _tensors(zgrad, arrays, as_tuple))
    expected = _fd_jacobian(_gradient_values(fn), arrays)
    for row, reference_row in zip(_rows(result, as_tuple, as_tuple), expected, strict=True):
        for block, reference in zip(row, reference_row, strict=True):
            np.testing.assert_allclose(block, reference, **FD_TOLERANCE)


def _contract(blocks, vectors, left):
    """``v^T M`` (``left``) or ``M v`` for the block matrix ``blocks[i][j]`` and vectors per block."""
    if left:
        return [sum(np.tensordot(v, rows[j], axes=v.ndim) for v, rows in zip(vectors, blocks))
                for j in range(len(blocks[0]))]
    return [sum(np.tensordot(row[j], v, axes=v.ndim) for j, v in enumerate(vectors)) for row in blocks]


@pytest.mark.parametrize("which, case", PRODUCT_CASES)
def test_products_match_finite_differences(which, case):
    arrays, as_tuple, fn = CASES[case]
    inputs, v, (output, product) = _product(zgrad, which, case, create_graph=False, inputs_require_grad=False)
    if which in ("vjp", "jvp"):
        blocks = _fd_jacobian(_values(fn), arrays)
    else:
        blocks = _fd_jacobian(_gradient_values(fn), arrays)
    expected = _contract(blocks, [t.numpy() for t in _leaves(v)], left=which in ("vjp", "vhp"))
    for got, reference in zip(_leaves(product), expected, strict=True):
        np.testing.assert_allclose(got.numpy(), reference, **FD_TOLERANCE)
    for got, reference in zip(_leaves(output), _values(fn)(arrays), strict=True):
        assert not got.requires_grad
        np.testing.assert_allclose(got.numpy(), reference, rtol=1e-12)
    assert not any(t.requires_grad for t in _leaves(product))
    assert isinstance(product, tuple) == (as_tuple if which != "jvp" else _returns_tuple(fn, arrays))


def test_closed_forms_and_unused_inputs():
    F = zgrad.autograd.functional
    x, y = zgrad.tensor([0.5, -1.0, 2.0], dtype=zgrad.float64), zgrad.tensor([3.0, 4.0], dtype=zgrad.float64)
    xs = x.numpy()
    np.testing.assert_array_equal(F.hessian(lambda x: (x ** 3).sum(), x).numpy(), np.diag(6 * xs))
    (hxx, hxy), (hyx, hyy) = F.hessian(lambda x, y: (x ** 3).sum(), (x, y))
    np.testing.assert_array_equal(hxx.numpy(), np.diag(6 * xs))
    for block, shape in ((hxy, (3, 2)), (hyx, (2, 3)), (hyy, (2, 2))):
        assert tuple(block.shape) == shape and not block.numpy().any()
    jx, jy = F.jacobian(lambda x, y: x * 2.0, (x, y))
    np.testing.assert_array_equal(jx.numpy(), 2 * np.eye(3))
    assert tuple(jy.shape) == (3, 2) and not jy.numpy().any()
    _, (vx, vy) = F.vjp(lambda x, y: x ** 2, (x, y), zgrad.ones(3, dtype=zgrad.float64))
    np.testing.assert_array_equal(vx.numpy(), 2 * xs)
    assert tuple(vy.shape) == (2,) and not vy.numpy().any()
    _, (out_x, out_y) = F.jvp(lambda x: (x ** 2, y * 1.0), x, zgrad.ones(3, dtype=zgrad.float64))
    np.testing.assert_array_equal(out_x.numpy(), 2 * xs)
    assert tuple(out_y.shape) == (2,) and not out_y.numpy().any()  # y is not an input: zeros
    for product in (F.vhp, F.hvp):
        _, (px, py) = product(lambda x, y: (x ** 3).sum(), (x, y), (x, y))
        np.testing.assert_allclose(px.numpy(), 6 * xs * xs, rtol=1e-15)
        assert not py.numpy().any()
    # a one-element input needs no v; a tensor captured from outside is not differentiated
    s = zgrad.tensor(1.5, dtype=zgrad.float64, requires_grad=True)
    assert float(F.jvp(lambda t: t * s, s)[1]) == 1.5 and float(F.hvp(lambda t: t ** 3, s)[1]) == 9.0
    assert tuple(F.jacobian(lambda x: x.sum() * x[:0], x).shape) == (0, 3)  # an empty output: an empty Jacobian


def test_create_graph_keeps_the_graph_to_inputs_and_v():
    F = zgrad.autograd.functional
    x = zgrad.tensor([0.5, -1.0, 2.0], dtype=zgrad.float64, requires_grad=True)
    v = zgrad.tensor([1.0, 2.0, -0.5], dtype=zgrad.float64, requires_grad=True)
    xs, vs = x.detach().numpy(), v.detach().numpy()
    output, product = F.vjp(lambda x: x ** 3, x, v, create_graph=True)
    assert output.requires_grad and product.requires_grad
    gx, gv = zgrad.autograd.grad(product.sum(), (x, v))  # product = 3 x^2 v
    np.testing.assert_allclose(gx.numpy(), 6 * xs * vs, rtol=1e-15)
    np.testing.assert_allclose(gv.numpy(), 3 * xs * xs, rtol=1e-15)
    jac = F.jacobian(lambda x: x ** 3, x, create_graph=True)
    (g,) = zgrad.autograd.grad(jac.sum(), x)  # d/dx of sum(diag(3 x^2))
    np.testing.assert_allclose(g.numpy(), 6 * xs, rtol=1e-15)
    _, hv = F.hvp(lambda x: (x ** 4).sum(), x, v, create_graph=True)  # 12 x^2 v
    (third,) = zgrad.autograd.grad(hv.sum(), x)
    np.testing.assert_allclose(third.numpy(), 24 * xs * vs, rtol=1e-15)
    hessian = F.hessian(lambda x: (x ** 4).sum(), x, create_graph=True)
    (third,) = zgrad.autograd.grad(hessian.sum(), x)
    np.testing.assert_allclose(third.numpy(), 24 * xs, rtol=1e-15)
