"""The lazy modules (LazyLinear, LazyConv*/LazyConvTranspose*, LazyBatchNorm*, LazyInstanceNorm*),
UninitializedParameter / UninitializedBuffer and LazyModuleMixin, against PyTorch: the inferred
sizes, the class and repr before and after the first forward, state dicts of uninitialized and
initialized modules, loading real weights into an uninitialized module, an optimizer made before
the dry run, a short training run equal to PyTorch's, and PyTorch's errors."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import zgrad
from cuda_helpers import requires_cuda
from helpers import require_torch
from zgrad.nn.modules.lazy import LazyModuleMixin
from zgrad.nn.parameter import Parameter, UninitializedBuffer, UninitializedParameter, is_lazy

nn = zgrad.nn

# (class, keyword arguments, the first input's shape)
CASES = [
    ("LazyLinear", dict(out_features=3), (2, 5)),
    ("LazyLinear", dict(out_features=4, bias=False), (2, 3, 5)),
    ("LazyLinear", dict(out_features=2), (7,)),
    ("LazyConv1d", dict(out_channels=4, kernel_size=3), (2, 3, 8)),
    ("LazyConv1d", dict(out_channels=4, kernel_size=3, padding="same"), (3, 8)),
    ("LazyConv2d", dict(out_channels=4, kernel_size=3, groups=2, padding=1), (2, 6, 8, 8)),
    ("LazyConv2d", dict(out_channels=4, kernel_size=(3, 2), stride=2), (3, 8, 8)),
    ("LazyConv3d", dict(out_channels=4, kernel_size=2, stride=2, bias=False), (1, 2, 4, 4, 4)),
    ("LazyConvTranspose1d", dict(out_channels=4, kernel_size=3), (2, 3, 8)),
    ("LazyConvTranspose2d", dict(out_channels=4, kernel_size=3, stride=2, output_padding=1, groups=2),
     (2, 6, 5, 5)),
    ("LazyConvTranspose2d", dict(out_channels=2, kernel_size=3), (3, 5, 5)),
    ("LazyConvTranspose3d", dict(out_channels=4, kernel_size=2), (1, 2, 3, 3, 3)),
    ("LazyBatchNorm1d", dict(), (4, 3)),
    ("LazyBatchNorm1d", dict(bias=False, momentum=None), (4, 3, 5)),
    ("LazyBatchNorm2d", dict(affine=False), (2, 3, 4, 4)),
    ("LazyBatchNorm3d", dict(track_running_stats=False), (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", dict(), (2, 3, 5)),
    ("LazyInstanceNorm2d", dict(affine=False, track_running_stats=False), (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", dict(eps=1e-3), (2, 3, 2, 2, 2)),
]
IDS = [f"{name}-{i}" for i, (name, _, _) in enumerate(CASES)]


def _numpy_state(module) -> dict:
    return {k: v.detach().numpy() for k, v in module.state_dict().items()}


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:input's size at dim=1 does not match num_features")  # torch's, num_features 0
@pytest.mark.parametrize("name, kwargs, shape", CASES, ids=IDS)
def test_shapes_are_inferred_and_the_module_becomes_the_ordinary_class(name, kwargs, shape):
    torch = require_torch()
    ours = getattr(nn, name)(dtype=zgrad.float64, **kwargs)
    theirs = getattr(torch.nn, name)(dtype=torch.float64, **kwargs)
    assert repr(ours) == repr(theirs)
    assert type(ours).cls_to_become.__name__ == type(theirs).cls_to_become.__name__
    assert ours.has_uninitialized_params() == theirs.has_uninitialized_params()
    state, expected = ours.state_dict(), theirs.state_dict()
    assert list(state) == list(expected)
    assert [type(v).__name__ for v in state.values()] == [type(v).__name__ for v in expected.values()]
    x = np.random.default_rng(0).standard_normal(shape)
    out, reference = ours(zgrad.tensor(x)), theirs(torch.tensor(x))
    assert type(ours) is getattr(nn, name[4:]) and type(ours).__name__ == type(theirs).__name__
    # A norm without parameters or statistics has nothing to infer, and PyTorch leaves num_features 0
    # (its forward then warns); zgrad's records the input's channels (its norms check them).
    assert repr(ours) == (repr(theirs).replace("(0,", f"({shape[1]},") if "(0," in repr(theirs) else repr(theirs))
    assert not ours._forward_pre_hooks and not hasattr(ours, "has_uninitialized_params")
    assert out.shape == tuple(reference.shape)
    state, expected = _numpy_state(ours), _numpy_state(theirs)
    assert {k: v.shape for k, v in state.items()} == {k: v.shape for k, v in expected.items()}
    for key, value in ours.named_parameters():
        assert type(value) is Parameter and value.is_leaf and value.requires_grad and value.dtype == np.float64, key
    if "Norm" in name:  # deterministic: the initial values and the statistics of the first batch
        for key in state:
            np.testing.assert_allclose(state[key], expected[key], rtol=1e-12, err_msg=key)
        np.testing.assert_allclose(out.detach().numpy(), reference.detach().numpy(), rtol=1e-11, atol=1e-12)
    else:  # the ordinary layer's bounds; then, with torch's values, torch's output
        fan_in = np.prod(ours.weight.shape[1:]) if "Transpose" not in name else \
            ours.weight.shape[1] * np.prod(ours.weight.shape[2:])
        for value in state.values():
            assert np.abs(value).max() <= 1 / np.sqrt(fan_in)
        ours.load_state_dict({k: zgrad.tensor(v) for k, v in expected.items()})
        np.testing.assert_allclose(ours(zgrad.tensor(x)).detach().numpy(), reference.detach().numpy(), rtol=1e-11,
                                   atol=1e-12)


@pytest.mark.parametrize("lazy, make", [
    (lambda: nn.LazyLinear(3), lambda: nn.Linear(5, 3)),
    (lambda: nn.LazyConv2d(4, 3, groups=2), lambda: nn.Conv2d(6, 4, 3, groups=2)),
    (lambda: nn.LazyConvTranspose1d(4, 2), lambda: nn.ConvTranspose1d(6, 4, 2)),
    (lambda: nn.LazyConv3d(2, 2, bias=False), lambda: nn.Conv3d(6, 2, 2, bias=False)),
])
def test_initialization_draws_as_the_ordinary_class_at_that_point(lazy, make):
    """Making the lazy module draws nothing; the first forward draws what the ordinary module's
    constructor draws, in its order, from zgrad's generator."""
    module = lazy()
    shape = {nn.Linear: (2, 5), nn.Conv2d: (1, 6, 5, 5), nn.ConvTranspose1d: (1, 6, 5), nn.Conv3d: (1, 6, 3, 3, 3)}
    zgrad.manual_seed(7)
    expected = make()
    x = zgrad.randn(*shape[type(expected)])
    zgrad.manual_seed(7)
    module(x)
    for key, value in expected.state_dict().items():
        np.testing.assert_array_equal(module.state_dict()[key].numpy(), value.numpy(), err_msg=key)


@pytest.mark.torch
def test_uninitialized_state_dict_loads_real_weights():
    torch = require_torch()
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Conv1d(1, 2, 2),
                                 torch.nn.BatchNorm1d(2)).double()
    theirs[3].running_mean.uniform_()
    lazy_theirs = torch.nn.Sequential(torch.nn.LazyLinear(4), torch.nn.ReLU(), torch.nn.LazyConv1d(2, 2),
                                      torch.nn.LazyBatchNorm1d())
    ours = nn.Sequential(nn.LazyLinear(4), nn.ReLU(), nn.LazyConv1d(2, 2), nn.LazyBatchNorm1d()).double()
    assert list(ours.state_dict()) == list(lazy_theirs.state_dict())
    assert isinstance(ours.state_dict()["0.weight"], UninitializedParameter)
    assert isinstance(ours.state_dict()["3.running_mean"], UninitializedBuffer)
    result = ours.load_state_dict({k: zgrad.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    assert repr(result) == "<All keys matched successfully>"
    assert not any(m.has_uninitialized_params() for m in ours if isinstance(m, LazyModuleMixin))
    assert type(ours[0]) is nn.LazyLinear and type(ours[0].weight) is Parameter  # still lazy until the forward
    x = np.random.default_rng(1).standard_normal((5, 1, 3))
    out = ours.eval()(zgrad.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), theirs.eval()(torch.tensor(x)).detach().numpy(), rtol=1e-12)
    assert [type(m).__name__ for m in ours] == ["Linear", "ReLU", "Conv1d", "BatchNorm1d"]
    assert (ours[0].in_features, ours[2].in_channels, ours[3].num_features) == (3, 1, 2)


@pytest.mark.torch
def test_partial_and_lazy_to_lazy_loads_as_torch():
    torch = require_torch()
    weight = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    for lib in (zgrad, torch):
        module = lib.nn.LazyLinear(3)
        result = module.load_state_dict({"weight": lib.tensor(weight)}, strict=False)
        assert list(result.missing_keys) == ["bias"] and not result.unexpected_keys
        assert type(module.weight).__name__ == "Parameter" and type(module.bias).__name__ == "UninitializedParameter"
        module = lib.nn.LazyLinear(3)
        assert repr(module.load_state_dict(lib.nn.LazyLinear(3).state_dict())) == "<All keys matched successfully>"
        assert module.has_uninitialized_params()


@pytest.mark.torch
def test_initialized_state_dict_round_trips():
    torch = require_torch()
    model = nn.Sequential(nn.LazyConv2d(3, 3), nn.LazyBatchNorm2d(), nn.Flatten(), nn.LazyLinear(2))
    model(zgrad.randn(2, 2, 6, 6))
    state = model.state_dict()
    fresh = nn.Sequential(nn.LazyConv2d(3, 3), nn.LazyBatchNorm2d(), nn.Flatten(), nn.LazyLinear(2))
    fresh.load_state_dict(state)
    plain = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.Flatten(), nn.Linear(48, 2))
    plain.load_state_dict(state)
    x = zgrad.randn(4, 2, 6, 6)
    expected = model.eval()(x).numpy()
    np.testing.assert_array_equal(fresh.eval()(x).numpy(), expected)
    np.testing.assert_array_equal(plain.eval()(x).numpy(), expected)
    theirs = torch.nn.Sequential(torch.nn.LazyConv2d(3, 3), torch.nn.LazyBatchNorm2d(), torch.nn.Flatten(),
                                 torch.nn.LazyLinear(2))
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in state.items()})
    np.testing.assert_allclose(theirs.eval()(torch.tensor(x.numpy())).detach().numpy(), expected, rtol=1e-5,
                               atol=1e-6)


@pytest.mark.torch
def test_loading_an_uninitialized_value_into_an_initialized_module_raises_as_torch():
    torch = require_torch()
    messages = []
    for lib in (zgrad, torch):
        with pytest.raises(RuntimeError) as info:
            lib.nn.Linear(5, 3).load_state_dict(lib.nn.LazyLinear(3).state_dict())
        messages.append(str(info.value))
    assert messages[0] == messages[1]


@pytest.mark.torch
@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_training_with_an_optimizer_made_before_the_dry_run_matches_torch(optimizer):
    torch = require_torch()
    options = dict(lr=0.05, momentum=0.9) if optimizer == "SGD" else dict(lr=0.01)

    def model(lib):
        return lib.nn.Sequential(lib.nn.LazyConv2d(4, 3, padding=1), lib.nn.ReLU(), lib.nn.LazyBatchNorm2d(),
                                 lib.nn.Flatten(), lib.nn.LazyLinear(8), lib.nn.Tanh(), lib.nn.LazyLinear(3)).double()

    ours, theirs = model(zgrad), model(torch)
    ours_opt = getattr(zgrad.optim, optimizer)(ours.parameters(), **options)
    theirs_opt = getattr(torch.optim, optimizer)(theirs.parameters(), **options)
    rng = np.random.default_rng(3)
    x, target = rng.standard_normal((6, 2, 5, 5)), rng.integers(0, 3, 6)
    with zgrad.no_grad():
        ours(zgrad.tensor(x[:2]))
    with torch.no_grad():
        theirs(torch.tensor(x[:2]))
    ours.load_state_dict({k: zgrad.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    assert [p.shape for p in ours_opt.param_groups[0]["params"]] == [tuple(p.shape) for p in theirs.parameters()]
    assert all(p is q for p, q in zip(ours_opt.param_groups[0]["params"], ours.parameters()))
    for _ in range(4):
        for lib, module, opt in ((zgrad, ours, ours_opt), (torch, theirs, theirs_opt)):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(module(lib.tensor(x)), lib.tensor(target))
            loss.backward()
            opt.step()
    for (key, value), expected in zip(ours.state_dict().items(), theirs.state_dict().values()):
        np.testing.assert_allclose(value.numpy(), expected.numpy(), rtol=1e-9, atol=1e-12, err_msg=key)


@pytest.mark.torch
def test_using_an_uninitialized_parameter_raises_torchs_errors():
    torch = require_torch()
    weight = nn.LazyLinear(3).weight
    expected_weight = torch.nn.LazyLinear(3).weight
    for use in (lambda w: w + 1, lambda w: w.sum(), lambda w: w.numel(), lambda w: w.dim(), lambda w: w[0],
                lambda w: w.detach(), lambda w: w.requires_grad_(), lambda w: len(w), lambda w: w.clone(),
                lambda w: w.numpy()):
        for w in (weight, expected_weight):
            with pytest.raises(ValueError, match="Attempted to use an uninitialized parameter in .*LazyModule"):
                use(w)
    with pytest.raises(ValueError, match=r"in <function linear>\. .*`zgrad\.nn\.parameter\.UninitializedParameter`"):
        nn.functional.linear(zgrad.ones(2, 3), weight)
    for init in (lambda w: nn.init.zeros_(w), lambda w: nn.init.kaiming_uniform_(w)):
        with pytest.raises(ValueError, match="Attempted to use an uninitialized parameter"):
            init(weight)
    with pytest.raises(ValueError, match=r"in <method '__add__' of 'zgrad\.Tensor' objects>"):
        weight + 1
    with pytest.raises(ValueError, match="UninitializedBuffer"):
        UninitializedBuffer() * 2
    for lib, w in ((zgrad, weight), (torch, expected_weight)):
        with pytest.raises(RuntimeError) as info:
            w.shape
        assert str(info.value).startswith("Can't access the shape of an uninitialized parameter or buffer.")
        with pytest.raises(RuntimeError, match="Can't share memory on an uninitialized parameter or buffer"):
            lib.nn.LazyLinear(3).share_memory()
        assert (repr(w), w.dtype == lib.float32, w.device.type, w.requires_grad, w.is_leaf, w.grad) == \
            ("<UninitializedParameter>", True, "cpu", True, True, None)
        assert tuple(w.size()) == (0,) and tuple(w.data.shape) == (0,)
        assert repr(UninitializedBuffer()) == "<UninitializedBuffer>"
    assert is_lazy(weight) and not is_lazy(zgrad.ones(1))


@pytest.mark.torch
def test_inference_errors_match_torch():
    torch = require_torch()
    cases = [
        (lambda lib: lib.nn.LazyConv2d(4, 3), (1, 2, 3, 8, 8)),
        (lambda lib: lib.nn.LazyConvTranspose3d(4, 3), (3, 8, 8)),
        (lambda lib: lib.nn.LazyConv2d(4, 3, groups=2), (1, 3, 8, 8)),
        (lambda lib: lib.nn.LazyLinear(3), (1,)),
    ]
    for make, shape in cases:
        found = []
        for lib in (zgrad, torch):
            module = make(lib)
            with pytest.raises(Exception) as info:
                module(lib.zeros(shape)[0] if shape == (1,) else lib.zeros(*shape))
            found.append(info.value)
            assert module.has_uninitialized_params() and type(module).__name__.startswith("Lazy")
        ours, theirs = found
        assert type(ours) is type(theirs)
        assert str(ours).replace("zgrad.Size", "torch.Size") == str(theirs)
    found = []
    for lib in (zgrad, torch):  # weights loaded for 5 inputs, then an input of 7
        source = lib.nn.Linear(5, 3)
        module = lib.nn.LazyLinear(3)
        module.load_state_dict(source.state_dict())
        with pytest.raises(AssertionError) as info:
            module(lib.zeros(2, 7))
        found.append(str(info.value))
    assert found[0] == found[1] == "The in_features inferred from input: 7 is not equal to in_features from " \
                                   "self.weight: 5"


def test_a_custom_lazy_module():
    class Scale(LazyModuleMixin, nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = UninitializedParameter()
            self.register_buffer("offset", UninitializedBuffer())

        def initialize_parameters(self, x):
            self.weight.materialize(x.shape[-1])
            self.offset.materialize(x.shape[-1])
            with zgrad.no_grad():
                self.weight.fill_(2.0)
                self.offset.fill_(1.0)

        def forward(self, x):
            return x * self.weight + self.offset

    module = Scale()
    order = []
    module.register_forward_pre_hook(lambda m, args: order.append(type(m.weight).__name__))
    out = module(zgrad.ones(2, 3))
    assert order == ["Parameter"] and type(module) is Scale and type(module.offset) is zgrad.Tensor
    np.testing.assert_array_equal(out.detach().numpy(), np.full((2, 3), 3.0))

    class Broken(LazyModuleMixin, nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = UninitializedParameter()

        def initialize_parameters(self, x):
            pass

        def forward(self, x):
            return x

    with pytest.raises(RuntimeError, match="^module Broken has not been fully initialized$"):
        Broken()(zgrad.ones(1))

    class Unimplemented(LazyModuleMixin, nn.Module):
        def forward(self, x):
            return x

    with pytest.raises(NotImplementedError, match="initialize_parameters is not implemented for Unimplemented"):
        Unimplemented()(zgrad.ones(1))


def test_initialize_parameters_by_hand_then_forward():
    module = nn.LazyLinear(3)
    module.initialize_parameters(zgrad.ones(2, 4))
    assert type(module) is nn.LazyLinear and module.in_features == 4 and not module.has_uninitialized_params()
    module(zgrad.ones(2, 4))
    assert type(module) is nn.Linear and repr(module) == "Linear(in_features=4, out_features=3, bias=True)"


def test_materialize_and_conversions():
    param = UninitializedParameter()
    param.materialize((2, 3))
    assert type(param) is Parameter and param.shape == (2, 3) and param.requires_grad and param.dtype == np.float32
    param = UninitializedParameter(requires_grad=False, dtype=zgrad.float64)
    param.materialize(4)
    assert param.shape == (4,) and not param.requires_grad and param.dtype == np.float64
    buffer = UninitializedBuffer()
    buffer.materialize([2], dtype=zgrad.float64)
    assert type(buffer) is zgrad.Tensor and buffer.dtype == np.float64 and not buffer.requires_grad
    with pytest.raises(RuntimeError, match="requires gradients must be floating point"):
        UninitializedParameter().materialize((2,), dtype=zgrad.int64)
    module = nn.LazyBatchNorm1d().double()
    assert (module.weight.dtype, module.running_mean.dtype) == (np.float64, np.float64)
    assert isinstance(module.running_mean, UninitializedBuffer) and isinstance(module.weight, UninitializedParameter)
    module(zgrad.ones(4, 3, dtype=zgrad.float64))
    assert module.running_var.dtype == np.float64 and module.running_var.shape == (3,)
    assert nn.LazyLinear(3, dtype=zgrad.float64).weight.dtype == np.float64
    copied = copy.deepcopy(nn.LazyLinear(3))
    assert isinstance(copied.weight, UninitializedParameter)
    copied(zgrad.ones(2, 5))
    assert type(copied) is nn.Linear and copied.weight.shape == (3, 5)


@requires_cuda
def test_lazy_modules_on_cuda():
    module = nn.LazyLinear(3, device="cuda")
    assert module.weight.device.type == "cuda"
    module(zgrad.ones(2, 4, device="cuda"))
    assert module.weight.device.type == "cuda" and module.weight.shape == (3, 4)
    module = nn.LazyConv1d(2, 2).cuda()
    assert isinstance(module.weight, UninitializedParameter) and module.weight.is_cuda
    out = module(zgrad.ones(1, 3, 5, device="cuda"))
    assert out.is_cuda and module.weight.is_cuda and module.in_channels == 3
