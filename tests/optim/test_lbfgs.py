"""``optim.LBFGS`` against ``torch.optim.LBFGS`` from the same start, in float64: Rosenbrock's
function with fixed steps and with the strong-Wolfe line search (also in float32), and a small
network; its state and state dicts in PyTorch's layout (a run resumed from a state dict continues
bit for bit, and torch's state dicts load); on CUDA as on the CPU; its signature, defaults and
errors; and ``Optimizer.state``, a ``defaultdict(dict)`` as PyTorch's.

The two libraries' dot products and ``add_(..., alpha=)`` round differently in the last bit
(PyTorch's BLAS and fused multiply-add), and L-BFGS amplifies such differences as it converges
(``y = g_new - g_old`` cancels), so the runs here are sized to stay within 1e-10 of torch's."""

from __future__ import annotations

import collections
import inspect
import io

import numpy as np
import pytest

import zgrad
from cuda_helpers import TOLERANCE, is_device_array, requires_cuda
from helpers import require_torch, torch

STATE_KEYS = ["H_diag", "al", "d", "func_evals", "n_iter", "old_dirs", "old_stps", "prev_flat_grad", "prev_loss", "ro",
              "t"]
# Rosenbrock's classic start; fixed steps of 1 overshoot along its valley, halved they converge
ROSENBROCK = [
    pytest.param(dict(lr=0.5, max_iter=10), id="fixed_steps"),
    pytest.param(dict(line_search_fn="strong_wolfe"), id="strong_wolfe"),
]
ROSENBROCK_START = [-1.2, 1.0]
NETWORK_SEED = 0


def rosenbrock_run(lib, options, steps=6, start=ROSENBROCK_START, dtype="float64"):
    """The point after each of ``steps`` steps minimizing Rosenbrock's function from ``start``, the
    loss each step returned, and the optimizer."""
    xy = lib.tensor(start, dtype=getattr(lib, dtype), requires_grad=True)
    optimizer = lib.optim.LBFGS([xy], **options)

    def closure():
        optimizer.zero_grad()
        loss = (1 - xy[0]) ** 2 + 100 * (xy[1] - xy[0] ** 2) ** 2
        loss.backward()
        return loss

    points, losses = [], []
    for _ in range(steps):
        losses.append(optimizer.step(closure).item())
        points.append(xy.detach().numpy().copy())
    return np.array(points), np.array(losses), optimizer


def network(lib, seed=NETWORK_SEED):
    """Linear(3, 8) + tanh + Linear(8, 1) in float64 with seeded weights (the same in both
    libraries), 16 samples of a smooth target, and a closure factory."""
    rng = np.random.default_rng(seed)
    model = lib.nn.Sequential(lib.nn.Linear(3, 8), lib.nn.Tanh(), lib.nn.Linear(8, 1)).double()
    model.load_state_dict({name: lib.tensor(rng.standard_normal(tuple(value.shape)) * 0.5)
                           for name, value in model.state_dict().items()})
    x = lib.tensor(rng.standard_normal((16, 3)))
    y = lib.sin(x.sum(1, keepdim=True))

    def closure_of(optimizer):
        def closure():
            optimizer.zero_grad()
            loss = lib.nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss
        return closure

    return model, closure_of


def network_run(lib, steps, options, state=None, weights=None):
    """Each step's loss and the flat parameters after it, training :func:`network` with LBFGS
    (started from the ``weights`` and the optimizer's ``state`` where given); the optimizer and the
    model's final weights (as numpy arrays)."""
    model, closure_of = network(lib)
    if weights is not None:
        model.load_state_dict({name: lib.tensor(value) for name, value in weights.items()})
    optimizer = lib.optim.LBFGS(model.parameters(), **options)
    if state is not None:
        optimizer.load_state_dict(state)
    closure = closure_of(optimizer)
    losses, params = [], []
    for _ in range(steps):
        losses.append(optimizer.step(closure).item())
        params.append(np.concatenate([p.detach().numpy().ravel() for p in model.parameters()]))
    weights = {name: value.detach().numpy().copy() for name, value in model.state_dict().items()}
    return np.array(losses), np.array(params), optimizer, weights


def through_a_checkpoint(state_dict):
    buffer = io.BytesIO()
    zgrad.save(state_dict, buffer)
    buffer.seek(0)
    return zgrad.load(buffer)


def only_state(optimizer):
    (state,) = [per for per in optimizer.state.values() if per]
    return state


@pytest.mark.torch
@pytest.mark.parametrize("dtype, tolerance", [("float64", 1e-10), ("float32", 1e-5)])
@pytest.mark.parametrize("options", ROSENBROCK)
def test_rosenbrock_steps_equal_torch_s(options, dtype, tolerance):
    """In float32 too: the line search's scalars are 0-d tensors in the parameters' dtype, as torch's."""
    require_torch()
    points, losses, optimizer = rosenbrock_run(zgrad, options, dtype=dtype)
    want_points, want_losses, torch_optimizer = rosenbrock_run(torch, options, dtype=dtype)
    for step, (got, want) in enumerate(zip(points, want_points), start=1):
        np.testing.assert_allclose(got, want, rtol=0, atol=tolerance, err_msg=f"after step {step}")
    np.testing.assert_allclose(losses, want_losses, rtol=tolerance, atol=tolerance * 1e-4)
    np.testing.assert_allclose(points[-1], [1.0, 1.0], atol=1e-3)  # it does reach the minimum
    ours, theirs = only_state(optimizer), only_state(torch_optimizer)
    assert (ours["func_evals"], ours["n_iter"]) == (theirs["func_evals"], theirs["n_iter"])


@pytest.mark.torch
def test_a_network_trains_as_on_torch_with_the_line_search():
    require_torch()
    options = dict(line_search_fn="strong_wolfe", max_iter=5)
    losses, params, _, _ = network_run(zgrad, 4, options)
    want_losses, want_params, _, _ = network_run(torch, 4, options)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-10)
    np.testing.assert_allclose(params, want_params, rtol=1e-10, atol=1e-12)
    assert losses[-1] < losses[0] / 10


def test_a_run_resumed_from_a_state_dict_continues_bit_for_bit():
    options = dict(line_search_fn="strong_wolfe", max_iter=4, history_size=3)  # a full history shifts
    _, uninterrupted, original, _ = network_run(zgrad, 4, options)
    _, _, optimizer, weights = network_run(zgrad, 2, options)
    state = through_a_checkpoint({"model": weights, "optimizer": optimizer.state_dict()})
    _, resumed, loaded, _ = network_run(zgrad, 2, options, state["optimizer"], state["model"])
    np.testing.assert_array_equal(resumed, uninterrupted[2:])
    for key in ("n_iter", "func_evals", "prev_loss"):
        assert only_state(loaded)[key] == only_state(original)[key], key
    assert len(only_state(loaded)["old_dirs"]) == 3


@pytest.mark.torch
def test_state_and_state_dict_have_torch_s_layout():
    require_torch()
    options = dict(line_search_fn="strong_wolfe", max_iter=3)
    _, _, optimizer, _ = network_run(zgrad, 2, options)
    _, _, torch_optimizer, _ = network_run(torch, 2, options)
    first = optimizer.param_groups[0]["params"][0]
    assert list(optimizer.state) == [first] and sorted(optimizer.state[first]) == STATE_KEYS
    ours, theirs = optimizer.state_dict(), torch_optimizer.state_dict()
    assert ours["param_groups"] == theirs["param_groups"]
    assert list(ours["state"]) == list(theirs["state"]) == [0]
    for key, want in theirs["state"][0].items():
        got = ours["state"][0][key]
        for item, expected in (zip(got, want, strict=True) if isinstance(want, list) else [(got, want)]):
            if expected is None:  # al's entries beyond the history
                assert item is None, key
            elif isinstance(expected, torch.Tensor):
                assert isinstance(item, zgrad.Tensor) and item.shape == tuple(expected.shape), key
                np.testing.assert_allclose(item.numpy(), expected.numpy(), rtol=1e-8, atol=1e-12, err_msg=key)
            else:
                assert type(item) is type(expected), key
                assert item == pytest.approx(expected, rel=1e-10), key


def torch_state_as_numpy(state_dict):
    """torch's LBFGS state dict with its tensors (also in the history lists) as numpy arrays."""
    def converted(value):
        if isinstance(value, list):
            return [converted(item) for item in value]
        return value.numpy() if isinstance(value, torch.Tensor) else value
    return {"state": {k: {n: converted(v) for n, v in per.items()} for k, per in state_dict["state"].items()},
            "param_groups": state_dict["param_groups"]}


def zgrad_state_as_torch(state_dict):
    def converted(value):
        if isinstance(value, list):
            return [converted(item) for item in value]
        return torch.from_numpy(value.numpy().copy()) if isinstance(value, zgrad.Tensor) else value
    return {"state": {k: {n: converted(v) for n, v in per.items()} for k, per in state_dict["state"].items()},
            "param_groups": state_dict["param_groups"]}


@pytest.mark.torch
def test_torch_state_dicts_load_into_zgrad_and_zgrad_state_dicts_into_torch():
    require_torch()
    options = dict(line_search_fn="strong_wolfe", max_iter=3)
    _, want, _, _ = network_run(torch, 4, options)
    _, _, torch_optimizer, torch_weights = network_run(torch, 2, options)
    _, from_torch, _, _ = network_run(zgrad, 2, options, torch_state_as_numpy(torch_optimizer.state_dict()),
                                      torch_weights)
    _, _, zgrad_optimizer, zgrad_weights = network_run(zgrad, 2, options)
    _, from_zgrad, _, _ = network_run(torch, 2, options, zgrad_state_as_torch(zgrad_optimizer.state_dict()),
                                      zgrad_weights)
    np.testing.assert_allclose(from_torch, want[2:], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(from_zgrad, want[2:], rtol=1e-10, atol=1e-12)


@pytest.mark.torch
def test_signature_and_defaults_are_torch_s():
    require_torch()

    def described(cls):
        return [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()]

    assert described(zgrad.optim.LBFGS) == described(torch.optim.LBFGS)
    assert described(zgrad.optim.LBFGS.step) == described(torch.optim.LBFGS.step)
    for options in ({}, dict(max_iter=10), dict(max_iter=7, max_eval=3, lr=0.5, history_size=4)):
        ours = zgrad.optim.LBFGS([zgrad.ones(2, requires_grad=True)], **options)
        theirs = torch.optim.LBFGS([torch.ones(2, requires_grad=True)], **options)
        assert ours.defaults == theirs.defaults
        assert ours.param_groups[0].keys() == theirs.param_groups[0].keys()


@requires_cuda
def test_on_cuda_as_on_the_cpu_with_its_state_on_the_device():
    options = dict(line_search_fn="strong_wolfe", max_iter=5)
    on_cpu, _, cpu_optimizer = rosenbrock_run(zgrad, options, steps=2)
    xy = zgrad.tensor(ROSENBROCK_START, dtype=zgrad.float64).cuda().requires_grad_()
    optimizer = zgrad.optim.LBFGS([xy], **options)

    def closure():
        optimizer.zero_grad()
        loss = (1 - xy[0]) ** 2 + 100 * (xy[1] - xy[0] ** 2) ** 2
        loss.backward()
        return loss

    for step in range(2):
        optimizer.step(closure)
        np.testing.assert_allclose(xy.detach().cpu().numpy(), on_cpu[step], **TOLERANCE[np.dtype(np.float64)])
    state = only_state(optimizer)
    assert all(is_device_array(state[key]) for key in ("d", "prev_flat_grad", "H_diag"))
    assert all(is_device_array(y) for y in state["old_dirs"] + state["old_stps"] + state["ro"])
    loaded = zgrad.optim.LBFGS([zgrad.zeros(2, dtype=zgrad.float64).cuda().requires_grad_()])
    loaded.load_state_dict(cpu_optimizer.state_dict())  # moves to the parameter's device
    assert is_device_array(only_state(loaded)["d"]) and all(is_device_array(y) for y in only_state(loaded)["old_dirs"])


def test_max_eval_defaults_to_five_quarters_of_max_iter():
    assert zgrad.optim.LBFGS([zgrad.ones(1, requires_grad=True)], max_iter=10).defaults["max_eval"] == 12
    assert zgrad.optim.LBFGS([zgrad.ones(1, requires_grad=True)]).defaults["max_eval"] == 25


def test_a_step_at_the_minimum_evaluates_once_and_moves_nothing():
    _, losses, optimizer = rosenbrock_run(zgrad, {}, steps=1, start=[1.0, 1.0])
    assert losses[0] == 0.0 and only_state(optimizer) == {"func_evals": 1, "n_iter": 0}


def test_the_closure_runs_with_gradients_enabled_and_params_without_grad_stay():
    unused = zgrad.ones(2, dtype=zgrad.float64, requires_grad=True)
    with zgrad.no_grad():
        points, _, _ = rosenbrock_run(zgrad, dict(line_search_fn="strong_wolfe"), steps=1)
    assert not np.allclose(points[0], ROSENBROCK_START)
    xy = zgrad.tensor(ROSENBROCK_START, dtype=zgrad.float64, requires_grad=True)
    optimizer = zgrad.optim.LBFGS([xy, unused], max_iter=3)

    def closure():
        optimizer.zero_grad()
        loss = ((xy - 3) ** 2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    np.testing.assert_array_equal(unused.numpy(), [1.0, 1.0])
    np.testing.assert_allclose(xy.numpy(), [3.0, 3.0])


def test_two_parameter_groups_are_refused_as_by_torch():
    a, b = zgrad.ones(2, requires_grad=True), zgrad.ones(2, requires_grad=True)
    message = r"LBFGS doesn't support per-parameter options \(parameter groups\)"
    with pytest.raises(ValueError, match=message):
        zgrad.optim.LBFGS([{"params": [a]}, {"params": [b], "lr": 0.1}])
    optimizer = zgrad.optim.LBFGS([a])
    with pytest.raises(ValueError, match=message):
        optimizer.add_param_group({"params": [b]})
    assert len(optimizer.param_groups) == 1


@pytest.mark.torch
def test_two_parameter_groups_raise_torch_s_error():
    require_torch()
    errors = []
    for lib in (zgrad, torch):
        with pytest.raises(ValueError) as error:
            lib.optim.LBFGS([{"params": [lib.ones(2, requires_grad=True)]},
                             {"params": [lib.ones(2, requires_grad=True)]}])
        errors.append(str(error.value))
    assert errors[0] == errors[1]


def test_step_needs_a_closure():
    optimizer = zgrad.optim.LBFGS([zgrad.ones(2, requires_grad=True)])
    with pytest.raises(TypeError, match=r"LBFGS.step\(\) missing 1 required positional argument: 'closure'"):
        optimizer.step()
    with pytest.raises(TypeError, match="LBFGS.step needs a closure that clears the gradients.*; got NoneType"):
        optimizer.step(None)
    with pytest.raises(NotImplementedError, match=r"LBFGS cannot step from given gradients.*call step\(closure\)"):
        optimizer.step_with_gradients({})


def test_invalid_options():
    p = zgrad.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        zgrad.optim.LBFGS([p], lr=-1)
    with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
        zgrad.optim.LBFGS([p], lr=zgrad.ones(2))
    optimizer = zgrad.optim.LBFGS([p], line_search_fn="backtracking")
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        optimizer.step(lambda: p.sum())


def test_a_one_element_tensor_lr_steps_as_its_number():
    got, _, _ = rosenbrock_run(zgrad, dict(lr=zgrad.tensor([0.5], dtype=zgrad.float64), max_iter=5), steps=2)
    want, _, _ = rosenbrock_run(zgrad, dict(lr=0.5, max_iter=5), steps=2)
    np.testing.assert_array_equal(got, want)


class Counting(zgrad.optim.Optimizer):
    """An optimizer written as PyTorch's are: its step reads ``self.state[p]`` for a new ``p``."""

    def __init__(self, params):
        super().__init__(params, dict(lr=0.5))

    def step(self, closure=None):
        for p in self.param_groups[0]["params"]:
            state = self.state[p]
            if len(state) == 0:
                state["steps"] = 0
            state["steps"] += 1


def test_optimizer_state_is_a_defaultdict_as_torch_s():
    p = zgrad.ones(2, requires_grad=True)
    optimizer = Counting([p])
    assert isinstance(optimizer.state, collections.defaultdict) and optimizer.state.default_factory is dict
    optimizer.step()
    optimizer.step()
    assert optimizer.state[p] == {"steps": 2}
    fresh = Counting([zgrad.ones(2, requires_grad=True)])
    fresh.load_state_dict(optimizer.state_dict())
    assert isinstance(fresh.state, collections.defaultdict) and fresh.state.default_factory is dict
    fresh.step()
    assert list(fresh.state.values()) == [{"steps": 3}]
