"""Optimizer state dicts in PyTorch's layout: a run interrupted by a checkpoint continues bit for
bit, torch's state dicts load into zgrad (and zgrad's into torch), and ``add_param_group`` follows
``torch.optim.Optimizer``'s rules."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import zgrad
from helpers import require_torch, torch
from zgrad.kernels import dispatch

SHAPES = [(3, 4), (4,), (2, 2)]
STEPS = 50
MIDDLE = 25

CONFIGS = [
    pytest.param("SGD", dict(lr=0.1, momentum=0.9), [dict(lr=0.05, dampening=0.2)], id="sgd_momentum"),
    pytest.param("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01), [dict(lr=0.1)], id="sgd_nesterov"),
    pytest.param("Adam", dict(lr=0.01, amsgrad=True), [dict(lr=0.02, betas=(0.8, 0.99))], id="adam_amsgrad"),
    pytest.param("Adam", dict(lr=0.01, weight_decay=0.05), [dict(lr=0.003, eps=1e-6)], id="adam"),
    # NAdam's mu_product and ASGD's eta and mu: 0-d float32 tensors in the dict, floats in the state
    pytest.param("NAdam", dict(lr=0.01, weight_decay=0.05), [dict(decoupled_weight_decay=True)], id="nadam"),
    pytest.param("ASGD", dict(lr=0.05, lambd=0.01, t0=10), [dict(lr=0.02, weight_decay=0.1)], id="asgd"),
    pytest.param("RAdam", dict(lr=0.01), [dict(lr=0.02, betas=(0.8, 0.9))], id="radam"),
    pytest.param("Adamax", dict(lr=0.01), [dict(weight_decay=0.1)], id="adamax"),
    pytest.param("Rprop", dict(lr=0.01), [dict(etas=(0.3, 1.5), step_sizes=(1e-4, 0.1))], id="rprop"),
    # Adafactor's row and column factors are not shaped like their parameters
    pytest.param("Adafactor", dict(lr=0.05), [dict(lr=0.5, weight_decay=0.1)], id="adafactor"),
]


def problem(seed=0):
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s) for s in SHAPES]
    grads = [[rng.standard_normal(s) * rng.choice([0.1, 1.0, 3.0]) for s in SHAPES] for _ in range(STEPS)]
    return params, grads


def groups_of(tensors, group_options):
    """Two groups: the first parameter with the optimizer's defaults, the others with ``group_options``."""
    return [{"params": tensors[:1]}, {"params": tensors[1:], **group_options[0]}]


def zgrad_run(name, options, group_options, params, grads, start=0, stop=STEPS, state=None):
    tensors = [zgrad.tensor(p, requires_grad=True) for p in params]
    optimizer = getattr(zgrad.optim, name)(groups_of(tensors, group_options), **options)
    if state is not None:
        optimizer.load_state_dict(state)
    for step_grads in grads[start:stop]:
        for t, g in zip(tensors, step_grads):
            t.grad = zgrad.tensor(g)
        optimizer.step()
    return [t.detach().numpy().copy() for t in tensors], optimizer


def torch_run(name, options, group_options, params, grads, start=0, stop=STEPS, state=None):
    tensors = [torch.tensor(p, requires_grad=True) for p in params]
    optimizer = getattr(torch.optim, name)(groups_of(tensors, group_options), **options)
    if state is not None:
        optimizer.load_state_dict(state)
    for step_grads in grads[start:stop]:
        for t, g in zip(tensors, step_grads):
            t.grad = torch.tensor(g)
        optimizer.step()
    return [t.detach().numpy().copy() for t in tensors], optimizer


def through_a_checkpoint(state_dict):
    buffer = io.BytesIO()
    zgrad.save(state_dict, buffer)
    buffer.seek(0)
    return zgrad.load(buffer)


@pytest.mark.parametrize("name, options, group_options", CONFIGS)
def test_a_run_resumed_from_a_checkpoint_continues_bit_for_bit(name, options, group_options):
    params, grads = problem()
    uninterrupted, _ = zgrad_run(name, options, group_options, params, grads)
    middle, optimizer = zgrad_run(name, options, group_options, params, grads, stop=MIDDLE)
    state = through_a_checkpoint({"params": middle, "optimizer": optimizer.state_dict()})
    resumed, _ = zgrad_run(name, options, group_options, state["params"], grads, start=MIDDLE,
                           state=state["optimizer"])
    for got, want in zip(resumed, uninterrupted):
        np.testing.assert_array_equal(got, want)


def as_numpy(state_dict):
    """A torch state dict with every tensor turned into a numpy array (what a converter does)."""
    return {"state": {k: {n: v.numpy() if isinstance(v, torch.Tensor) else v for n, v in per.items()}
                      for k, per in state_dict["state"].items()},
            "param_groups": state_dict["param_groups"]}


def as_torch(state_dict):
    return {"state": {k: {n: torch.from_numpy(v.numpy().copy()) if isinstance(v, zgrad.Tensor) else v
                          for n, v in per.items()} for k, per in state_dict["state"].items()},
            "param_groups": state_dict["param_groups"]}


@pytest.mark.torch
@pytest.mark.parametrize("name, options, group_options", CONFIGS)
def test_equal_to_torch_after_50_steps_with_a_state_dict_round_trip_in_the_middle(name, options, group_options):
    require_torch()
    params, grads = problem(1)
    want, _ = torch_run(name, options, group_options, params, grads)
    middle, optimizer = zgrad_run(name, options, group_options, params, grads, stop=MIDDLE)
    state = through_a_checkpoint(optimizer.state_dict())
    got, _ = zgrad_run(name, options, group_options, middle, grads, start=MIDDLE, state=state)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("name, options, group_options", CONFIGS)
def test_torch_state_dicts_load_into_zgrad_and_zgrad_state_dicts_into_torch(name, options, group_options):
    require_torch()
    params, grads = problem(2)
    want, _ = torch_run(name, options, group_options, params, grads)
    torch_middle, torch_optimizer = torch_run(name, options, group_options, params, grads, stop=MIDDLE)
    from_torch, _ = zgrad_run(name, options, group_options, torch_middle, grads, start=MIDDLE,
                              state=as_numpy(torch_optimizer.state_dict()))
    zgrad_middle, zgrad_optimizer = zgrad_run(name, options, group_options, params, grads, stop=MIDDLE)
    from_zgrad, _ = torch_run(name, options, group_options, zgrad_middle, grads, start=MIDDLE,
                              state=as_torch(zgrad_optimizer.state_dict()))
    for a, b, w in zip(from_torch, from_zgrad, want):
        np.testing.assert_allclose(a, w, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(b, w, rtol=1e-10, atol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("name, options, group_options", CONFIGS)
def test_the_layout_is_torch_s(name, options, group_options):
    require_torch()
    params, grads = problem(3)
    _, zgrad_optimizer = zgrad_run(name, options, group_options, params, grads, stop=3)
    _, torch_optimizer = torch_run(name, options, group_options, params, grads, stop=3)
    ours, theirs = zgrad_optimizer.state_dict(), torch_optimizer.state_dict()
    assert ours["state"].keys() == theirs["state"].keys()
    for index, per in theirs["state"].items():
        assert ours["state"][index].keys() == per.keys()
        for key, value in per.items():
            got = ours["state"][index][key]
            assert isinstance(got, zgrad.Tensor) and got.shape == tuple(value.shape), key
            assert str(got.dtype) == str(value.dtype).removeprefix("torch."), key
    for mine, their in zip(ours["param_groups"], theirs["param_groups"]):
        assert mine["params"] == their["params"]
        assert {k: mine[k] for k in mine if k != "params"}.items() <= their.items()


def test_state_tensors_share_the_optimizer_s_memory_and_loading_copies():
    p = zgrad.ones(3, requires_grad=True)
    optimizer = zgrad.optim.Adam([p], lr=0.1)
    p.grad = zgrad.ones(3)
    optimizer.step()
    state = optimizer.state_dict()
    step = state["state"][0]["step"]
    assert step.dtype == np.float32 and step.shape == () and step.item() == 1.0
    assert np.shares_memory(state["state"][0]["exp_avg"].numpy(), optimizer.state[p]["exp_avg"])
    fresh = zgrad.optim.Adam([zgrad.ones(3, requires_grad=True)], lr=0.5)
    fresh.load_state_dict(state)
    (loaded,) = fresh.state.values()
    assert loaded["step"] == 1 and not np.shares_memory(loaded["exp_avg"], optimizer.state[p]["exp_avg"])
    assert fresh.param_groups[0]["lr"] == 0.1


def test_sgd_without_momentum_has_no_state_like_torch():
    p = zgrad.ones(2, requires_grad=True)
    optimizer = zgrad.optim.SGD([p], lr=0.1)
    p.grad = zgrad.ones(2)
    optimizer.step()
    assert optimizer.state_dict()["state"] == {}


def test_state_moves_to_each_parameter_s_dtype_and_device():
    p = zgrad.zeros(2, dtype=zgrad.float64, requires_grad=True)
    optimizer = zgrad.optim.SGD([p], lr=0.1, momentum=0.9)
    optimizer.load_state_dict({"state": {0: {"momentum_buffer": np.array([1.0, 2.0], dtype=np.float32)}},
                               "param_groups": [{"lr": 0.1, "momentum": 0.9, "dampening": 0, "weight_decay": 0,
                                                 "nesterov": False, "params": [0]}]})
    buffer = optimizer.state[p]["momentum_buffer"]
    assert buffer.dtype == np.float64 and buffer.flags.c_contiguous
    if zgrad.cuda.is_available():
        q = zgrad.zeros(2, requires_grad=True).cuda().detach().requires_grad_()
        on_cuda = zgrad.optim.SGD([q], lr=0.1, momentum=0.9)
        on_cuda.load_state_dict(optimizer.state_dict())
        assert dispatch.device_type_of(on_cuda.state[q]["momentum_buffer"]) == "cuda"


class Averaging(zgrad.optim.Optimizer):
    """An optimizer with state of its own names (as Adadelta's): the conversion knows no names."""

    def __init__(self, params, lr=0.5):
        super().__init__(params, dict(lr=lr))

    def _update(self, param, grad, group, state):
        if not state:
            state["step"] = 0
            state["square_avg"] = np.zeros(param.shape)
            state["acc_delta"] = np.zeros(param.shape)
        state["step"] += 1
        state["square_avg"] += grad * grad
        state["acc_delta"][...] = state["square_avg"] / state["step"]
        param._data -= group["lr"] * state["acc_delta"]


def test_the_conversion_is_generic_over_state_names():
    p = zgrad.tensor([1.0, -2.0], dtype=zgrad.float64, requires_grad=True)
    optimizer = Averaging([p])
    for _ in range(3):
        p.grad = zgrad.tensor([0.5, 1.5], dtype=zgrad.float64)
        optimizer.step()
    state = through_a_checkpoint(optimizer.state_dict())
    assert sorted(state["state"][0]) == ["acc_delta", "square_avg", "step"]
    q = zgrad.tensor(p.numpy().copy(), requires_grad=True)
    resumed = Averaging([q])
    resumed.load_state_dict(state)
    for tensor, opt in ((p, optimizer), (q, resumed)):
        tensor.grad = zgrad.tensor([0.5, 1.5], dtype=zgrad.float64)
        opt.step()
    np.testing.assert_array_equal(q.numpy(), p.numpy())
    assert resumed.state[q]["step"] == 4


def test_load_state_dict_errors():
    a, b = zgrad.ones(2, requires_grad=True), zgrad.ones(3, requires_grad=True)
    optimizer = zgrad.optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1, momentum=0.9)
    state = optimizer.state_dict()
    with pytest.raises(ValueError, match="loaded state dict has a different number of parameter groups"):
        zgrad.optim.SGD([a, b], lr=0.1).load_state_dict(state)
    with pytest.raises(ValueError, match="loaded state dict contains a parameter group that doesn't match the size"):
        zgrad.optim.SGD([{"params": [a, b]}, {"params": [zgrad.ones(1, requires_grad=True)]}],
                        lr=0.1).load_state_dict(state)
    state["state"] = {1: {"momentum_buffer": zgrad.ones(5)}}
    with pytest.raises(ValueError, match=r"holds 'momentum_buffer' of shape \[5\] for parameter 1, whose shape is \[3\]"):
        optimizer.load_state_dict(state)
    own = Averaging([a])  # an optimizer without maximize
    own_state = own.state_dict()
    own_state["param_groups"][0]["maximize"] = True
    with pytest.raises(ValueError, match="parameter group 0 sets maximize=True, which Averaging does not implement"):
        own.load_state_dict(own_state)


def test_add_param_group_follows_torch():
    a, b, c = (zgrad.ones(2, requires_grad=True) for _ in range(3))
    optimizer = zgrad.optim.SGD([a], lr=0.1)
    group = {"params": b, "lr": 0.5, "name": "head"}
    optimizer.add_param_group(group)
    assert optimizer.param_groups[1] is group and group["params"] == [b] and group["momentum"] == 0
    assert group["name"] == "head"
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        optimizer.add_param_group({"params": [c, a]})
    with pytest.raises(TypeError, match="optimizer parameters need to be organized in ordered collections"):
        optimizer.add_param_group({"params": {c}})
    with pytest.raises(TypeError, match="param_group must be a dict, but got list"):
        optimizer.add_param_group([c])
    with pytest.raises(ValueError, match="all optimizer param groups should be with/without names. cannot add param "
                                         "group with names"):
        optimizer.add_param_group({"params": [("c", c)]})
    with pytest.warns(UserWarning, match="optimizer contains a parameter group with duplicate parameters"):
        optimizer.add_param_group({"params": [c, c]})


def test_named_parameters_record_their_names():
    model = zgrad.nn.Linear(2, 1)
    optimizer = zgrad.optim.Adam(model.named_parameters(), lr=0.1)
    assert optimizer.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]
    with pytest.raises(ValueError, match="all optimizer params should be with/without names"):
        zgrad.optim.Adam([("weight", model.weight), model.bias])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zgrad.optim.Adam(model.parameters()).load_state_dict(optimizer.state_dict())


@pytest.mark.parametrize("name, scalars", [("NAdam", ["mu_product"]), ("ASGD", ["eta", "mu"])])
def test_scalar_state_is_a_float32_tensor_in_the_dict_and_a_float_in_the_optimizer(name, scalars):
    p = zgrad.ones(3, dtype=zgrad.float64, requires_grad=True)
    optimizer = getattr(zgrad.optim, name)([p], lr=0.1)
    for _ in range(2):
        p.grad = zgrad.full((3,), 0.5, dtype=zgrad.float64)
        optimizer.step()
    packed = through_a_checkpoint(optimizer.state_dict())["state"][0]
    q = zgrad.ones(3, dtype=zgrad.float64, requires_grad=True)
    resumed = getattr(zgrad.optim, name)([q], lr=0.1)
    resumed.load_state_dict({"state": {0: packed}, "param_groups": optimizer.state_dict()["param_groups"]})
    for key in scalars:
        assert packed[key].dtype == np.float32 and packed[key].shape == (), key
        value = resumed.state[q][key]
        assert type(value) is float and value == optimizer.state[p][key] == float(packed[key].item()), key


def test_adafactor_factors_are_checked_against_their_own_shapes():
    p = zgrad.ones(3, 4, requires_grad=True)
    optimizer = zgrad.optim.Adafactor([p])
    p.grad = zgrad.ones(3, 4)
    optimizer.step()
    state = optimizer.state_dict()
    assert state["state"][0]["row_var"].shape == (3, 1) and state["state"][0]["col_var"].shape == (1, 4)
    zgrad.optim.Adafactor([zgrad.ones(3, 4, requires_grad=True)]).load_state_dict(state)
    state["state"][0]["row_var"] = zgrad.ones(3, 4)
    with pytest.raises(ValueError, match=r"holds 'row_var' of shape \[3, 4\] for parameter 0, whose shape is "
                                         r"\[3, 4\] \(expected \[3, 1\]\)"):
        zgrad.optim.Adafactor([zgrad.ones(3, 4, requires_grad=True)]).load_state_dict(state)
