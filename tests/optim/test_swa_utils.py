"""``zgrad.optim.swa_utils`` against ``torch.optim.swa_utils``: AveragedModel's averages (every
averaging function, with and without buffers) and state dict, SWALR's learning rates at every step,
update_bn's recomputed statistics; and, without torch, the same rules checked by hand, the
restored BatchNorm momenta and mode, and every documented error."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import zgrad
from helpers import require_torch, torch
from zgrad.optim.swa_utils import (
    SWALR, AveragedModel, get_ema_avg_fn, get_ema_multi_avg_fn, get_swa_avg_fn, get_swa_multi_avg_fn, update_bn,
)

TOL = dict(rtol=1e-12, atol=1e-12)
UPDATES = 5


def conv_bn(lib):
    """A small float64 conv + BatchNorm + linear model, built the same way in zgrad and torch."""
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3, momentum=0.3), nn.ReLU(), nn.Flatten(),
                         nn.Linear(3 * 4 * 4, 2)).to(lib.float64)


def to_lib(lib, array):
    return torch.from_numpy(np.array(array)) if lib is torch else zgrad.tensor(np.array(array))


def as_numpy(tensor):
    return tensor.detach().cpu().numpy() if hasattr(tensor, "cpu") else tensor.detach().numpy()


def perturbed_states(reference_state, seed):
    """UPDATES state dicts (numpy): the reference plus seeded noise; integer buffers count up."""
    rng = np.random.default_rng(seed)
    states = []
    for k in range(UPDATES):
        state = {}
        for name, value in reference_state.items():
            value = as_numpy(value)
            if np.issubdtype(value.dtype, np.integer):
                state[name] = value + 3 * k + 1
            else:
                state[name] = value + rng.standard_normal(value.shape)
        states.append(state)
    return states


def load_numpy_state(lib, model, state):
    model.load_state_dict({name: to_lib(lib, value) for name, value in state.items()})


AVERAGING = {
    "default": lambda sw: {},
    "ema_avg_fn": lambda sw: dict(avg_fn=sw.get_ema_avg_fn(0.9)),
    "ema_multi_avg_fn": lambda sw: dict(multi_avg_fn=sw.get_ema_multi_avg_fn(0.9)),
    "swa_avg_fn": lambda sw: dict(avg_fn=sw.get_swa_avg_fn()),
    "swa_multi_avg_fn": lambda sw: dict(multi_avg_fn=sw.get_swa_multi_avg_fn()),
}


def averaged_state(lib, states, averaging, use_buffers):
    """The averaged model's state dict (numpy) after one update per state, or the error raised."""
    model = conv_bn(lib)
    load_numpy_state(lib, model, states[0])
    averaged = lib.optim.swa_utils.AveragedModel(model, use_buffers=use_buffers,
                                                 **AVERAGING[averaging](lib.optim.swa_utils))
    try:
        for state in states:
            load_numpy_state(lib, model, state)
            averaged.update_parameters(model)
    except RuntimeError as error:
        return type(error)
    return {name: as_numpy(value) for name, value in averaged.state_dict().items()}


@pytest.mark.torch
@pytest.mark.parametrize("use_buffers", [False, True])
@pytest.mark.parametrize("averaging", list(AVERAGING))
def test_averaged_model_equals_torch_s(averaging, use_buffers):
    require_torch()
    torch.manual_seed(0)
    states = perturbed_states(conv_bn(torch).state_dict(), seed=1)
    want = averaged_state(torch, states, averaging, use_buffers)
    got = averaged_state(zgrad, states, averaging, use_buffers)
    if not isinstance(want, dict):  # torch's in-place SWA mean refuses the integer buffer
        assert got is want
        return
    assert list(got) == list(want)
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        np.testing.assert_allclose(got[name], want[name], **TOL, err_msg=name)


@pytest.mark.torch
def test_a_torch_averaged_model_state_dict_loads():
    require_torch()
    torch.manual_seed(2)
    model = conv_bn(torch)
    averaged = torch.optim.swa_utils.AveragedModel(model, use_buffers=True)
    for state in perturbed_states(model.state_dict(), seed=3):
        load_numpy_state(torch, model, state)
        averaged.update_parameters(model)
    theirs = averaged.state_dict()
    ours = AveragedModel(conv_bn(zgrad), use_buffers=True)
    ours.load_state_dict({name: zgrad.tensor(value.numpy()) for name, value in theirs.items()})
    assert list(ours.state_dict()) == list(theirs)
    assert int(ours.n_averaged) == UPDATES
    for name, value in ours.state_dict().items():
        np.testing.assert_array_equal(as_numpy(value), theirs[name].numpy(), err_msg=name)
    x = np.random.default_rng(4).standard_normal((3, 2, 6, 6))
    averaged.eval()
    ours.eval()
    np.testing.assert_allclose(as_numpy(ours(zgrad.tensor(x))), averaged(torch.from_numpy(x)).detach().numpy(), **TOL)


def swalr_rates(lib, anneal_epochs, anneal_strategy, steps=14):
    params = [lib.nn.Parameter(lib.ones(1)), lib.nn.Parameter(lib.ones(1))]
    optimizer = lib.optim.SGD([{"params": [params[0]]}, {"params": [params[1]], "lr": 0.3}], lr=1.0)
    scheduler = lib.optim.swa_utils.SWALR(optimizer, swa_lr=[0.05, 0.2], anneal_epochs=anneal_epochs,
                                          anneal_strategy=anneal_strategy)
    rates = [scheduler.get_last_lr()]
    for _ in range(steps):
        optimizer.step()
        scheduler.step()
        rates.append(scheduler.get_last_lr())
    return rates


@pytest.mark.torch
@pytest.mark.parametrize("anneal_epochs", [0, 1, 3, 10])
@pytest.mark.parametrize("anneal_strategy", ["cos", "linear"])
def test_swalr_rates_equal_torch_s_at_every_step(anneal_strategy, anneal_epochs):
    require_torch()
    assert swalr_rates(zgrad, anneal_epochs, anneal_strategy) == swalr_rates(torch, anneal_epochs, anneal_strategy)


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [dict(anneal_epochs=-1), dict(anneal_epochs=2.0), dict(anneal_strategy="exp"),
                                    dict(swa_lr=[0.1, 0.2])])
def test_swalr_errors_equal_torch_s(kwargs):
    require_torch()
    messages = []
    for lib in (zgrad, torch):
        optimizer = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=1.0)
        with pytest.raises(ValueError) as info:
            lib.optim.swa_utils.SWALR(optimizer, **{"swa_lr": 0.1, **kwargs})
        messages.append(str(info.value))
    assert messages[0] == messages[1]


@pytest.mark.torch
def test_swalr_state_dict_has_torch_s_keys():
    require_torch()
    dicts = []
    for lib in (zgrad, torch):
        optimizer = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=1.0)
        scheduler = lib.optim.swa_utils.SWALR(optimizer, swa_lr=0.1, anneal_epochs=4)
        optimizer.step()
        scheduler.step()
        dicts.append(scheduler.state_dict())
    assert dicts[0].keys() <= dicts[1].keys()
    for key in dicts[0]:
        assert dicts[0][key] == dicts[1][key], key


def bn_state(lib, model):
    return {name: as_numpy(value) for name, value in model.state_dict().items()
            if "running" in name or "batches" in name}


@pytest.mark.torch
@pytest.mark.parametrize("plain_tensors", [False, True])
def test_update_bn_equals_torch_s(plain_tensors):
    require_torch()
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((10, 2, 6, 6)), rng.standard_normal((10, 2))
    torch.manual_seed(6)
    reference = conv_bn(torch)
    results = []
    for lib in (torch, zgrad):
        model = conv_bn(lib)
        load_numpy_state(lib, model, {name: as_numpy(value) for name, value in reference.state_dict().items()})
        model.eval()
        data = lib.utils.data.TensorDataset(to_lib(lib, x), to_lib(lib, y))
        loader = lib.utils.data.DataLoader(data, batch_size=4)
        if plain_tensors:
            loader = [batch[0] for batch in loader]
        lib.optim.swa_utils.update_bn(loader, model)
        assert not model.training and model[1].momentum == 0.3
        results.append(bn_state(lib, model))
    want, got = results
    assert list(got) == list(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], **TOL, err_msg=name)


# ---- without torch -------------------------------------------------------------------------------


def linear_with(value):
    model = zgrad.nn.Linear(2, 1).to(zgrad.float64)
    with zgrad.no_grad():
        model.weight.fill_(value)
        model.bias.fill_(-value)
    return model


def test_swa_utils_is_importable_as_torch_s():
    import zgrad.optim.swa_utils as module

    assert zgrad.optim.swa_utils is module
    assert set(module.__all__) == {"AveragedModel", "SWALR", "get_ema_avg_fn", "get_ema_multi_avg_fn",
                                   "get_swa_avg_fn", "get_swa_multi_avg_fn", "update_bn"}


@pytest.mark.parametrize("kwargs", [{}, dict(avg_fn=get_swa_avg_fn())])
def test_default_average_is_the_running_mean(kwargs):
    model = linear_with(1.0)
    averaged = AveragedModel(model, **kwargs)
    for value in (1.0, 2.0, 6.0, 3.0):
        with zgrad.no_grad():
            model.weight.fill_(value)
            model.bias.fill_(-value)
        averaged.update_parameters(model)
    assert int(averaged.n_averaged) == 4
    np.testing.assert_allclose(as_numpy(averaged.module.weight), [[3.0, 3.0]], **TOL)
    np.testing.assert_allclose(as_numpy(averaged.module.bias), [-3.0], **TOL)
    assert model.weight is not averaged.module.weight
    x = zgrad.tensor([[1.0, 2.0]], dtype=zgrad.float64)
    np.testing.assert_allclose(as_numpy(averaged(x)), [[6.0]], **TOL)


def test_the_first_update_copies_whatever_the_averaging_function():
    model = linear_with(5.0)
    averaged = AveragedModel(linear_with(0.0), avg_fn=get_ema_avg_fn(0.5))
    averaged.module.weight.detach().fill_(100.0)
    averaged.update_parameters(model)
    np.testing.assert_allclose(as_numpy(averaged.module.weight), [[5.0, 5.0]])


@pytest.mark.parametrize("factory", ["avg_fn", "multi_avg_fn"])
def test_ema_follows_its_formula(factory):
    decay = 0.75
    fn = get_ema_avg_fn(decay) if factory == "avg_fn" else get_ema_multi_avg_fn(decay)
    model = linear_with(0.0)
    averaged = AveragedModel(model, **{factory: fn})
    expected = 0.0
    for step, value in enumerate((0.0, 4.0, -2.0, 8.0)):
        with zgrad.no_grad():
            model.weight.fill_(value)
        averaged.update_parameters(model)
        expected = value if step == 0 else decay * expected + (1 - decay) * value
    np.testing.assert_allclose(as_numpy(averaged.module.weight), [[expected, expected]], **TOL)
    assert expected == pytest.approx(0.75 * (0.75 * 1.0 - 0.5) + 2.0)


def test_multi_average_functions_update_in_place():
    averaged = [zgrad.tensor([1.0, 2.0], dtype=zgrad.float64)]
    get_swa_multi_avg_fn()(averaged, [zgrad.tensor([4.0, 8.0], dtype=zgrad.float64)], 2)
    np.testing.assert_allclose(as_numpy(averaged[0]), [2.0, 4.0], **TOL)
    ints = [zgrad.tensor([10, 20])]
    get_ema_multi_avg_fn(0.5)(ints, [zgrad.tensor([13, 25])], 1)
    assert as_numpy(ints[0]).tolist() == [11, 22]  # 11.5 and 22.5, truncated into the integer tensor
    with pytest.raises(RuntimeError):
        get_swa_multi_avg_fn()([zgrad.tensor([1, 2])], [zgrad.tensor([3, 4])], 1)


def test_buffers_are_copied_without_use_buffers_and_averaged_with_it():
    model = zgrad.nn.BatchNorm1d(2).to(zgrad.float64)
    copied, averaged = AveragedModel(model), AveragedModel(model, use_buffers=True)
    for value in (2.0, 4.0):
        model.running_mean.fill_(value)
        copied.update_parameters(model)
        averaged.update_parameters(model)
    np.testing.assert_allclose(as_numpy(copied.module.running_mean), [4.0, 4.0])
    np.testing.assert_allclose(as_numpy(averaged.module.running_mean), [3.0, 3.0])
    assert list(averaged.state_dict())[0] == "n_averaged"
    assert all(name.startswith("module.") for name in list(averaged.state_dict())[1:])


def test_averaged_model_errors():
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        AveragedModel(linear_with(1.0), avg_fn=get_swa_avg_fn(), multi_avg_fn=get_swa_multi_avg_fn())
    for factory in (get_ema_avg_fn, get_ema_multi_avg_fn):
        for decay in (-0.1, 1.5):
            with pytest.raises(ValueError, match=r"Invalid decay value .* \[0,1\] range"):
                factory(decay)


def sgd(lr=1.0):
    return zgrad.optim.SGD([zgrad.nn.Parameter(zgrad.ones(1))], lr=lr)


@pytest.mark.parametrize("strategy, anneal_epochs, expected", [
    ("cos", 2, [1.0, 0.55, 0.1, 0.1, 0.1]),
    ("linear", 4, [1.0, 0.775, 0.55, 0.325, 0.1, 0.1]),
    ("linear", 0, [0.1, 0.1, 0.1]),
])
def test_swalr_first_steps_by_hand(strategy, anneal_epochs, expected):
    optimizer = sgd()
    scheduler = SWALR(optimizer, swa_lr=0.1, anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    rates = [optimizer.param_groups[0]["lr"]]
    for _ in expected[1:]:
        optimizer.step()
        scheduler.step()
        rates.append(optimizer.param_groups[0]["lr"])
    assert rates == pytest.approx(expected, abs=1e-12)
    assert optimizer.param_groups[0]["swa_lr"] == 0.1


def test_swalr_get_lr_outside_step_warns_and_state_dict_round_trips():
    optimizer = sgd()
    scheduler = SWALR(optimizer, swa_lr=0.1, anneal_epochs=3, anneal_strategy="linear")
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        scheduler.get_lr()
    state = scheduler.state_dict()
    assert "anneal_func" not in state and "optimizer" not in state
    other = SWALR(sgd(), swa_lr=0.1)
    other.load_state_dict(state)
    assert other.anneal_func(0.5) == 0.5 and other.anneal_epochs == 3


@pytest.mark.parametrize("kwargs, match", [
    (dict(anneal_epochs=-1), "anneal_epochs must be equal or greater than 0, got -1"),
    (dict(anneal_epochs=1.5), "anneal_epochs must be equal or greater than 0, got 1.5"),
    (dict(anneal_strategy="step"), "anneal_strategy must be one of 'cos' or 'linear', instead got step"),
    (dict(swa_lr=[0.1, 0.2]), "swa_lr must have the same length as optimizer.param_groups"),
])
def test_swalr_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SWALR(sgd(), **{"swa_lr": 0.1, **kwargs})


def test_update_bn_averages_every_batch_equally_and_restores_momentum_and_mode():
    rng = np.random.default_rng(7)
    batches = [rng.standard_normal((4, 2, 3)) * (k + 1) + k for k in range(3)]
    model = zgrad.nn.Sequential(zgrad.nn.BatchNorm1d(2, momentum=0.2), zgrad.nn.InstanceNorm1d(2)).to(zgrad.float64)
    model.eval()
    instance_norm_momentum = model[1].momentum
    update_bn([(zgrad.tensor(b), "label") for b in batches], model, device="cpu")
    assert not model.training and model[0].momentum == 0.2 and model[1].momentum == instance_norm_momentum
    np.testing.assert_allclose(as_numpy(model[0].running_mean), np.mean([b.mean((0, 2)) for b in batches], 0), **TOL)
    np.testing.assert_allclose(as_numpy(model[0].running_var), np.mean([b.var((0, 2), ddof=1) for b in batches], 0),
                               **TOL)
    assert int(model[0].num_batches_tracked) == 3


def test_update_bn_without_batchnorm_leaves_the_model_alone():
    model = zgrad.nn.Linear(2, 2)
    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        update_bn([zgrad.ones(1, 3)], model)  # a batch the model could not take: never run
    assert not model.training
