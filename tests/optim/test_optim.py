"""Every optimizer over 50 steps with two parameter groups of different options, against
torch.optim (float64 to 1e-12, float32 within float32 rounding) and, without torch, against
PyTorch's update rules written with numpy (tests/support/optim_reference.py) and first steps
worked out by hand; the base class's behaviour, the signatures and the argument errors."""

from __future__ import annotations

import inspect
import itertools
import re

import numpy as np
import pytest

import zgrad
from helpers import require_torch, torch
from optim_reference import REFERENCES

SHAPES = [(3, 4), (5,), (2, 3), (4,)]  # the first two in group 0, the others in group 1
STEPS = 50
NAMES = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "NAdam", "RAdam", "Adamax", "ASGD", "Rprop",
         "Adafactor"]
TOLERANCE = {np.float32: dict(rtol=2e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-15)}


def _options(**choices):
    """Every combination of the option values given (the product, in a fixed order)."""
    keys = list(choices)
    return [dict(zip(keys, values)) for values in itertools.product(*choices.values())]


def _momentum(momentum, dampening, nesterov):
    return dict(momentum=momentum, dampening=dampening, nesterov=nesterov)


# Per optimizer: constructor arguments, the second group's own lr, and every combination of the
# options that change the math. Consecutive combinations become one case's two groups.
COMBINATIONS = {
    "SGD": (dict(lr=0.05), 0.02, [
        {**_momentum(*m), **o} for m in [(0, 0, False), (0.9, 0, False), (0.8, 0.3, False), (0.9, 0, True)]
        for o in _options(weight_decay=[0, 0.1], maximize=[False, True])]),
    "Adam": (dict(lr=0.01), 0.03, _options(amsgrad=[False, True], maximize=[False, True], weight_decay=[0, 0.1],
                                           betas=[(0.9, 0.999), (0.3, 0.9)])),
    "AdamW": (dict(lr=0.01), 0.03, _options(amsgrad=[False, True], maximize=[False, True], weight_decay=[1e-2, 0.2])),
    "RMSprop": (dict(lr=0.01), 0.003, _options(momentum=[0, 0.9], centered=[False, True], maximize=[False, True],
                                               weight_decay=[0, 0.1])),
    "Adagrad": (dict(lr=0.1), 0.3, _options(initial_accumulator_value=[0, 0.5], lr_decay=[0, 0.05],
                                            weight_decay=[0, 0.1], maximize=[False, True])),
    "Adadelta": (dict(lr=1.0), 0.5, _options(weight_decay=[0, 0.1], maximize=[False, True], rho=[0.9, 0.5])),
    "NAdam": (dict(lr=0.01), 0.03, [*_options(weight_decay=[0, 0.1], maximize=[False, True],
                                              betas=[(0.9, 0.999), (0.3, 0.9)]),
                                    dict(weight_decay=0.1, decoupled_weight_decay=True, momentum_decay=0.05),
                                    dict(weight_decay=0.2, decoupled_weight_decay=True, maximize=True)]),
    # beta2 = 0.999 rectifies from step 6 on, beta2 = 0.9 from step 7 on: both branches run
    "RAdam": (dict(lr=0.01), 0.03, [*_options(weight_decay=[0, 0.1], maximize=[False, True],
                                              betas=[(0.9, 0.999), (0.3, 0.9)]),
                                    dict(weight_decay=0.1, decoupled_weight_decay=True),
                                    dict(weight_decay=0.2, decoupled_weight_decay=True, maximize=True)]),
    "Adamax": (dict(lr=0.01), 0.03, _options(weight_decay=[0, 0.1], maximize=[False, True],
                                             betas=[(0.9, 0.999), (0.3, 0.9)])),
    # t0=10: ax averages from step 12 on (before, mu == 1 and ax copies the parameters)
    "ASGD": (dict(lr=0.05, lambd=0.01, alpha=0.6), 0.02, _options(t0=[1e6, 10], weight_decay=[0, 0.1],
                                                                  maximize=[False, True])),
    "Rprop": (dict(lr=0.01), 0.05, _options(etas=[(0.5, 1.2), (0.3, 1.5)], step_sizes=[(1e-6, 50), (1e-3, 0.02)],
                                            maximize=[False, True])),
    # lr=0.5 in the second group: rho_t = 1/sqrt(t) < lr from step 5 on
    "Adafactor": (dict(lr=0.02, beta2_decay=-0.6), 0.5, _options(weight_decay=[0, 0.1], eps=[(None, 1e-3), (1e-3, 0.1)],
                                                               d=[1.0, 2.0], maximize=[False, True])),
}


def _cases():
    for name, (options, second_lr, combinations) in COMBINATIONS.items():
        for i in range(0, len(combinations), 2):
            first, second = (dict(c) for c in combinations[i:i + 2])
            constructor = dict(options)
            if name == "Adagrad":  # PyTorch takes the accumulator's start from the constructor only
                constructor["initial_accumulator_value"] = first.pop("initial_accumulator_value")
                assert second.pop("initial_accumulator_value") == constructor["initial_accumulator_value"]
            yield pytest.param(name, constructor, [first, {**second, "lr": second_lr}], id=f"{name}-{i // 2}")


CASES = list(_cases())


def problem(dtype, seed=0):
    """Initial parameters and a gradient sequence whose scale varies (so AMSGrad's max matters)."""
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = [[(rng.standard_normal(s) * k).astype(dtype) for s in SHAPES] for k in rng.uniform(0.1, 3.0, STEPS)]
    return params, grads


def run(lib, name, options, groups, params, grads):
    """Every step's parameters of ``lib.optim.<name>`` (zgrad or torch) over ``grads``."""
    tensors = [lib.tensor(p, requires_grad=True) for p in params]
    half = len(tensors) // 2
    optimizer = getattr(lib.optim, name)([{"params": tensors[:half], **groups[0]},
                                          {"params": tensors[half:], **groups[1]}], **options)
    history = []
    for step_grads in grads:
        optimizer.zero_grad()
        for t, g in zip(tensors, step_grads):
            t.grad = lib.tensor(g)
        optimizer.step()
        history.append([t.detach().numpy().copy() for t in tensors])
    return history


def run_reference(name, options, groups, params, grads):
    """Every step's parameters under the numpy rules of tests/support/optim_reference.py."""
    params = [p.copy() for p in params]
    states = [{} for _ in params]
    half = len(params) // 2
    history = []
    for step_grads in grads:
        for i, (p, g) in enumerate(zip(params, step_grads)):
            REFERENCES[name](p, g, states[i], **{**options, **groups[i >= half]})
        history.append([p.copy() for p in params])
    return history


def assert_histories_close(mine, reference, dtype, what):
    for step, (got, expected) in enumerate(zip(mine, reference, strict=True), start=1):
        for i, (p, q) in enumerate(zip(got, expected)):
            assert p.dtype == dtype
            np.testing.assert_allclose(p, q, err_msg=f"param {i} after step {step} differs from {what}",
                                       **TOLERANCE[dtype])


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name, options, groups", CASES)
def test_matches_torch_optim(name, options, groups, dtype):
    require_torch()
    params, grads = problem(dtype)
    assert_histories_close(run(zgrad, name, options, groups, params, grads),
                           run(torch, name, options, groups, params, grads), dtype, "torch.optim")


@pytest.mark.parametrize("name, options, groups", CASES)
def test_matches_numpy_reference(name, options, groups):
    params, grads = problem(np.float64)
    assert_histories_close(run(zgrad, name, options, groups, params, grads),
                           run_reference(name, options, groups, params, grads), np.float64, "the numpy reference")


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_adafactor_matches_torch_on_3d_row_and_0d_parameters(dtype):
    """Adafactor factors over the last two dimensions (a 3-D parameter, a single row) and keeps a
    plain variance for a 0-d parameter, as torch.optim.Adafactor."""
    require_torch()
    shapes = [(2, 3, 4), (1, 5), ()]
    rng = np.random.default_rng(5)
    params = [np.asarray(rng.standard_normal(s), dtype) for s in shapes]
    grads = [[np.asarray(rng.standard_normal(s) * k, dtype) for s in shapes] for k in rng.uniform(0.1, 3.0, STEPS)]
    groups = [{}, {"lr": 0.5, "maximize": True}]
    options = dict(lr=0.05, weight_decay=0.1)
    assert_histories_close(run(zgrad, "Adafactor", options, groups, params, grads),
                           run(torch, "Adafactor", options, groups, params, grads), dtype, "torch.optim")


@pytest.mark.torch
@pytest.mark.parametrize("name", NAMES)
def test_signatures_match_torch(name):
    require_torch()

    def described(cls):
        return [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()]

    assert described(getattr(zgrad.optim, name)) == described(getattr(torch.optim, name))


@pytest.mark.torch
@pytest.mark.parametrize("name", NAMES)
def test_state_and_groups_have_torchs_keys(name):
    require_torch()
    options, _, combinations = COMBINATIONS[name]
    ours, theirs = {}, {}
    for lib, found in ((zgrad, ours), (torch, theirs)):
        params = [lib.ones(3, requires_grad=True) for _ in combinations]
        optimizer = getattr(lib.optim, name)([{"params": [p], **c} for p, c in zip(params, combinations)
                                              if name != "Adagrad" or not c["initial_accumulator_value"]], **options)
        for p in params:
            p.grad = lib.ones(3)
        optimizer.step()
        found["groups"] = [sorted(g) for g in optimizer.param_groups]
        found["state"] = [sorted(optimizer.state.get(p, {})) for p in params]
    assert ours == theirs


def test_params_without_grad_are_unchanged():
    for name in NAMES:
        a, b = zgrad.ones(3, requires_grad=True), zgrad.ones(2, requires_grad=True)
        optimizer = getattr(zgrad.optim, name)([a, b], **COMBINATIONS[name][0])
        for _ in range(3):
            a.grad = zgrad.ones(3)
            optimizer.step()
        assert np.all(b.numpy() == 1) and not np.all(a.numpy() == 1), name
        if name == "Adagrad":  # built with the optimizer, as in PyTorch, and left alone
            assert optimizer.state[b]["step"] == 0 and np.all(optimizer.state[b]["sum"] == 0)
        else:
            assert b not in optimizer.state or not optimizer.state[b], name


def test_adagrad_accumulator_starts_at_the_constructors_value():
    a, b = zgrad.ones(2, requires_grad=True), zgrad.ones(2, requires_grad=True)
    optimizer = zgrad.optim.Adagrad([{"params": [a], "initial_accumulator_value": 5.0}], initial_accumulator_value=0.5)
    optimizer.add_param_group({"params": [b]})
    assert np.all(optimizer.state[a]["sum"] == 0.5) and optimizer.state[a]["step"] == 0
    assert b not in optimizer.state
    b.grad = zgrad.ones(2)
    optimizer.step()
    np.testing.assert_array_equal(optimizer.state[b]["sum"], [1.5, 1.5])


def _accepts(name, option):
    return option in inspect.signature(getattr(zgrad.optim, name)).parameters


@pytest.mark.parametrize("name", NAMES)
def test_implementation_options_change_nothing(name):
    params, grads = problem(np.float64)
    plain = run(zgrad, name, {}, [{}, {}], params, grads[:3])
    flags = [option for option in ("foreach", "fused", "capturable") if _accepts(name, option)]
    for options in [{flag: True} for flag in flags] + [{flag: False for flag in flags}]:
        assert_histories_close(run(zgrad, name, options, [{}, {}], params, grads[:3]), plain, np.float64, options)


def test_zero_grad():
    a = zgrad.ones(3, requires_grad=True)
    optimizer = zgrad.optim.SGD([a], lr=0.1)
    (a * 2).sum().backward()
    optimizer.zero_grad(set_to_none=False)
    assert a.grad is not None and np.all(a.grad.numpy() == 0)
    optimizer.zero_grad()
    assert a.grad is None


def test_step_uses_backward_gradients_and_closure():
    a = zgrad.tensor([1.0, -2.0], requires_grad=True)
    optimizer = zgrad.optim.SGD([a], lr=0.25)

    def closure():
        optimizer.zero_grad()
        loss = (a * a).sum()
        loss.backward()
        return loss

    assert optimizer.step(closure).item() == 5.0
    np.testing.assert_allclose(a.numpy(), [0.5, -1.0])


def test_param_groups_have_their_own_options():
    a, b = zgrad.ones(2, requires_grad=True), zgrad.ones(2, requires_grad=True)
    optimizer = zgrad.optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    for p in (a, b):
        p.grad = zgrad.ones(2)
    optimizer.step()
    np.testing.assert_allclose(a.numpy(), [0.9, 0.9])
    np.testing.assert_allclose(b.numpy(), [0.0, 0.0])


def test_step_with_gradients_takes_explicit_gradients():
    a, b = zgrad.ones(2, requires_grad=True), zgrad.ones(2, requires_grad=True)
    optimizer = zgrad.optim.SGD([a, b], lr=0.5)
    a.grad = zgrad.full(2, 100.0)  # ignored: step_with_gradients reads its argument, not .grad
    optimizer.step_with_gradients({a: np.array([1.0, 2.0])})
    np.testing.assert_allclose(a.numpy(), [0.5, 0.0])
    assert np.all(b.numpy() == 1)
    with pytest.raises(ValueError, match=r"gradient of shape \[3\] for a parameter of shape \[2\]"):
        optimizer.step_with_gradients({b: np.ones(3)})


def test_a_gradient_of_another_dtype_size_or_type_is_refused_as_torch_refuses_it():
    a = zgrad.ones(2, requires_grad=True)
    with pytest.raises(zgrad.errors.DTypeError, match="attempting to assign a gradient with dtype 'float64' to a "
                                                      "tensor with dtype 'float32'"):
        a.grad = zgrad.ones(2, dtype=np.float64)
    with pytest.raises(RuntimeError, match="attempting to assign a gradient of size '\\[3\\]' to a tensor of size "
                                           "'\\[2\\]'"):
        a.grad = zgrad.ones(3)
    with pytest.raises(TypeError, match="assigned grad expected to be a Tensor or None but got grad of type float"):
        a.grad = 0.0
    a.grad = zgrad.full((2,), 1.0)
    zgrad.optim.Adam([a], lr=0.1).step()
    np.testing.assert_allclose(a.numpy(), [0.9, 0.9], rtol=1e-6)


O = zgrad.optim
INVALID = [
    (O.SGD, dict(lr=-0.1), "Invalid learning rate: -0.1"),
    (O.SGD, dict(lr=0.1, momentum=-1), "Invalid momentum value: -1"),
    (O.SGD, dict(lr=0.1, weight_decay=-1), "Invalid weight_decay value: -1"),
    (O.SGD, dict(lr=0.1, nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
    (O.SGD, dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "Nesterov momentum requires"),
    (O.Adam, dict(lr=-1e-3), "Invalid learning rate: -0.001"),
    (O.Adam, dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    (O.Adam, dict(betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
    (O.Adam, dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    (O.Adam, dict(weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
    (O.AdamW, dict(lr=-1e-3), "Invalid learning rate: -0.001"),
    (O.AdamW, dict(betas=(0.9, 1.5)), "Invalid beta parameter at index 1: 1.5"),
    (O.AdamW, dict(weight_decay=-0.01), "Invalid weight_decay value: -0.01"),
    (O.RMSprop, dict(lr=-0.01), "Invalid learning rate: -0.01"),
    (O.RMSprop, dict(eps=-1e-8), "Invalid epsilon value: -1e-08"),
    (O.RMSprop, dict(momentum=-0.9), "Invalid momentum value: -0.9"),
    (O.RMSprop, dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    (O.RMSprop, dict(alpha=-0.5), "Invalid alpha value: -0.5"),
    (O.Adagrad, dict(lr=-0.01), "Invalid learning rate: -0.01"),
    (O.Adagrad, dict(lr_decay=-1), "Invalid lr_decay value: -1"),
    (O.Adagrad, dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    (O.Adagrad, dict(initial_accumulator_value=-0.1), "Invalid initial_accumulator_value value: -0.1"),
    (O.Adagrad, dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    (O.Adadelta, dict(lr=-1.0), "Invalid learning rate: -1.0"),
    (O.Adadelta, dict(rho=1.5), "Invalid rho value: 1.5"),
    (O.Adadelta, dict(eps=-1e-6), "Invalid epsilon value: -1e-06"),
    (O.Adadelta, dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    (O.NAdam, dict(lr=-1e-3), "Invalid learning rate: -0.001"),
    (O.NAdam, dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    (O.NAdam, dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
    (O.NAdam, dict(weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
    (O.NAdam, dict(momentum_decay=-0.1), "Invalid momentum_decay value: -0.1"),
    (O.RAdam, dict(lr=-1e-3), "Invalid learning rate: -0.001"),
    (O.RAdam, dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    (O.RAdam, dict(betas=(-0.1, 0.999)), "Invalid beta parameter at index 0: -0.1"),
    (O.RAdam, dict(weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
    (O.Adamax, dict(lr=-1e-3), "Invalid learning rate: -0.001"),
    (O.Adamax, dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    (O.Adamax, dict(betas=(0.9, 1.5)), "Invalid beta parameter at index 1: 1.5"),
    (O.Adamax, dict(weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
    (O.ASGD, dict(lr=-0.01), "Invalid learning rate: -0.01"),
    (O.ASGD, dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    (O.Rprop, dict(lr=-0.01), "Invalid learning rate: -0.01"),
    (O.Rprop, dict(etas=(1.5, 1.2)), "Invalid eta values: 1.5, 1.2"),
    (O.Rprop, dict(etas=(0.5, 0.9)), "Invalid eta values: 0.5, 0.9"),
    (O.Adafactor, dict(lr=-0.01), "Learning rate should be >= 0 but is: -0.01"),
    (O.Adafactor, dict(beta2_decay=0.5), "beta2_decay should be <= 0 but is: 0.5"),
    (O.Adafactor, dict(eps=(-1.0, 1e-3)), "epsilon1 should be >= 0 but is: -1.0"),
    (O.Adafactor, dict(eps=(None, -1e-3)), "epsilon2 should be >= 0 but is: -0.001"),
    (O.Adafactor, dict(d=0.5), "Clipping threshold d should be >= 1 but is: 0.5"),
    (O.Adafactor, dict(weight_decay=-1.0), "weight_decay should be >= 0 but is: -1.0"),
]


@pytest.mark.parametrize("cls, options, message", INVALID)
def test_invalid_hyper_parameters(cls, options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cls([zgrad.ones(2, requires_grad=True)], **options)


@pytest.mark.torch
@pytest.mark.parametrize("cls, options, message", INVALID)
def test_invalid_hyper_parameters_are_torch_s_errors(cls, options, message):
    require_torch()
    with pytest.raises(ValueError, match=re.escape(message)):
        getattr(torch.optim, cls.__name__)([torch.ones(2, requires_grad=True)], **options)


@pytest.mark.parametrize("name", [name for name in NAMES if _accepts(name, "differentiable")])
def test_differentiable_is_refused(name):
    p = zgrad.ones(2, requires_grad=True)
    with pytest.raises(NotImplementedError, match=f"{name}: differentiable=True is not supported.*differentiable=False"):
        getattr(zgrad.optim, name)([p], differentiable=True)
    with pytest.raises(NotImplementedError, match="differentiable=True is not supported"):
        getattr(zgrad.optim, name)([{"params": [p], "differentiable": True}])


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad"])
def test_fused_and_foreach_together_are_refused(name):
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
        getattr(zgrad.optim, name)([zgrad.ones(2, requires_grad=True)], fused=True, foreach=True)


def test_invalid_parameter_lists():
    with pytest.raises(ValueError, match="empty parameter list"):
        zgrad.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        zgrad.optim.SGD([zgrad.ones(2, requires_grad=True) * 2], lr=0.1)
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors, but one of the params is ndarray"):
        zgrad.optim.SGD([np.ones(2)], lr=0.1)
    with pytest.raises(TypeError, match="params argument given to the optimizer should be an iterable of Tensors"):
        zgrad.optim.SGD(zgrad.ones(2, requires_grad=True), lr=0.1)