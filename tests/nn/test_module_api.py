"""nn.Module bookkeeping (buffers, state dicts, traversal, train/eval, apply, to/float/double,
repr) and the containers and small layers, against PyTorch where it is installed."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import zgrad
from zgrad import nn
from helpers import check, require_torch, torch


def make_block(lib):
    """The same small model in either library: parameters, a persistent and a non-persistent
    buffer, an int buffer, a None parameter, and a module shared along two paths."""

    class Block(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(3, 4)
            self.scale = lib.nn.Parameter(lib.ones(4))
            self.register_parameter("unused", None)
            self.register_buffer("running", lib.zeros(4))
            self.register_buffer("scratch", lib.zeros(2), persistent=False)
            self.register_buffer("count", lib.tensor(0))

        def forward(self, x):
            return self.fc(x) * self.scale + self.running

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = lib.nn.Sequential(Block(), lib.nn.ReLU(), lib.nn.Linear(4, 2))
            self.head = self.body[2]  # shared with body.2
            self.extra = lib.nn.ModuleList([lib.nn.Identity(), lib.nn.Flatten()])

        def forward(self, x):
            return self.head(self.body[1](self.body[0](x)))

    return Net()


# --- buffers ------------------------------------------------------------------------------------

def test_buffers_are_listed_saved_and_reachable():
    net = make_block(zgrad)
    block = net.body[0]
    assert isinstance(block.running, zgrad.Tensor) and block.running.shape == (4,)
    assert [n for n, _ in net.named_buffers()] == ["body.0.running", "body.0.scratch", "body.0.count"]
    assert len(list(net.buffers())) == 3 and list(block.buffers(recurse=False))[0] is block.running
    state = net.state_dict()
    assert "body.0.running" in state and "body.0.count" in state and "body.0.scratch" not in state
    assert state["body.0.count"].dtype == np.int64
    assert not any(n.endswith("unused") for n in state), "a None parameter is not saved"


@pytest.mark.torch
def test_state_dict_keys_and_order_match_torch():
    names = list(make_block(zgrad).state_dict())
    assert names[:5] == ["body.0.scale", "body.0.running", "body.0.count", "body.0.fc.weight", "body.0.fc.bias"]
    assert "head.weight" in names and "body.2.weight" in names, "a shared module is saved under each of its names"
    if torch is not None:
        assert names == list(make_block(torch).state_dict())
        assert [n for n, _ in make_block(zgrad).named_parameters()] == \
            [n for n, _ in make_block(torch).named_parameters()]
        assert [n for n, _ in make_block(zgrad).named_modules()] == [n for n, _ in make_block(torch).named_modules()]
        assert [n for n, _ in make_block(zgrad).named_buffers()] == [n for n, _ in make_block(torch).named_buffers()]


def test_load_state_dict_with_buffers_round_trip():
    zgrad.manual_seed(0)
    source, target = make_block(zgrad), make_block(zgrad)
    with zgrad.no_grad():
        source.body[0].running.copy_(zgrad.tensor([1.0, 2.0, 3.0, 4.0]))
        source.body[0].count.fill_(7)
    result = target.load_state_dict(source.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(target.body[0].running.numpy(), [1, 2, 3, 4])
    assert target.body[0].count.item() == 7
    x = zgrad.randn(2, 3)
    np.testing.assert_array_equal(source(x).numpy(), target(x).numpy())


@pytest.mark.torch
def test_load_state_dict_assign_puts_the_values_themselves_in_place_as_torch():
    def load(lib):
        net = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3))
        net[0].bias.requires_grad_(False)
        state = {k: v.double() * 0 + 1 if v.is_floating_point() else v for k, v in net.state_dict().items()}
        state["0.weight"] = lib.nn.Parameter(state["0.weight"], requires_grad=False)
        old_weight = net[0].weight
        net.load_state_dict(state, assign=True)
        weight, bias, mean = net[0].weight, net[0].bias, net[1].running_mean
        return [weight is state["0.weight"], weight is old_weight, weight.requires_grad, type(bias).__name__,
                bias.requires_grad, bias.dtype == lib.float64, mean is state["1.running_mean"],
                net[1].num_batches_tracked.dtype == lib.int64]

    mine = load(zgrad)
    assert mine == [True, False, True, "Parameter", False, True, True, True]
    if torch is not None:
        assert mine == load(torch)
    net = nn.Linear(2, 3)
    with pytest.raises(ValueError, match="size mismatch for weight"):
        net.load_state_dict({"weight": zgrad.zeros(3, 3), "bias": zgrad.zeros(3)}, assign=True)
    assert net.weight.shape == (3, 2)
    net.load_state_dict({"weight": np.ones((3, 2), np.float32), "bias": zgrad.zeros(3)}, assign=True)
    assert isinstance(net.weight, nn.Parameter) and net.weight.sum().item() == 6


@pytest.mark.torch
def test_to_empty_and_type_as_torch():
    def run(lib):
        net = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.BatchNorm1d(2))
        weight = net[0].weight
        net.to_empty(device="cpu", recurse=False)  # the Sequential has nothing of its own
        same = net[0].weight is weight
        net.to_empty(device="cpu")
        kept = [net[0].weight is weight, type(net[0].weight).__name__, net[0].weight.requires_grad,
                tuple(net[0].weight.shape), str(net[1].num_batches_tracked.dtype).split(".")[-1]]
        try:
            net.type(lib.int32)
        except RuntimeError as e:
            kept.append(str(e))
        net.requires_grad_(False).type(lib.float64)
        return same, kept, [str(t.dtype).split(".")[-1] for t in net.state_dict().values()]

    mine = run(zgrad)
    assert mine == (True, [True, "Parameter", True, (2, 2), "int64", "data set to a tensor that requires gradients "
                           "must be floating point or complex dtype"], ["float64"] * 7)
    if torch is not None:
        assert mine == run(torch)


@pytest.mark.torch
def test_load_state_dict_non_strict_reports_keys():
    net = make_block(zgrad)
    state = net.state_dict()
    del state["body.0.running"]
    state["body.0.bogus"] = zgrad.zeros(1)
    with pytest.raises(KeyError, match=r'Missing key\(s\) in state_dict: "body.0.running". \n\tUnexpected key\(s\) in '
                                       r'state_dict: "body.0.bogus". '):
        net.load_state_dict(state)
    result = net.load_state_dict(state, strict=False)
    assert result == (["body.0.running"], ["body.0.bogus"])
    if torch is not None:
        ref = make_block(torch)
        ref_state = ref.state_dict()
        del ref_state["body.0.running"]
        ref_state["body.0.bogus"] = torch.zeros(1)
        ref_result = ref.load_state_dict(ref_state, strict=False)
        assert (result.missing_keys, result.unexpected_keys) == (ref_result.missing_keys, ref_result.unexpected_keys)


def test_buffer_shape_mismatch_loads_nothing():
    net = make_block(zgrad)
    state = net.state_dict()
    state["body.0.running"] = zgrad.zeros(5)
    state["body.0.fc.bias"] = zgrad.full((4,), 9.0)
    with pytest.raises(ValueError, match=r"size mismatch for body.0.running: copying a param with shape zgrad.Size\(\[5\]\)"):
        net.load_state_dict(state)
    assert not np.any(net.body[0].fc.bias.numpy() == 9.0)


@pytest.mark.torch
def test_a_strict_load_reports_missing_unexpected_and_mismatched_keys_together_as_torch():
    """PyTorch lists every error: the missing and unexpected keys first, then each size mismatch."""
    def errors(lib):
        net = make_block(lib)
        state = net.state_dict()
        del state["body.0.running"]
        state["body.0.bogus"] = lib.zeros(1)
        state["body.0.fc.bias"] = lib.zeros(5)
        with pytest.raises(RuntimeError) as caught:
            net.load_state_dict(state)
        return str(caught.value).replace("torch.", "zgrad.")
    got = errors(zgrad)
    assert got.splitlines()[1:] == ['\tMissing key(s) in state_dict: "body.0.running". ',
                                    '\tUnexpected key(s) in state_dict: "body.0.bogus". ',
                                    "\tsize mismatch for body.0.fc.bias: copying a param with shape zgrad.Size([5]) from "
                                    "checkpoint, the shape in current model is zgrad.Size([4])."]
    torch = pytest.importorskip("torch")
    assert got == errors(torch)


def test_buffer_assignment_and_registration_errors():
    block = make_block(zgrad).body[0]
    block.running = zgrad.ones(4)
    assert "running" in dict(block.named_buffers()) and block.running.numpy().sum() == 4
    block.running = None
    assert "running" not in dict(block.named_buffers()) and block.running is None
    with pytest.raises(TypeError, match="cannot assign 'int' as buffer 'count'"):
        block.count = 3
    with pytest.raises(TypeError, match=r"cannot assign 'ndarray' object to buffer 'b' \(zgrad.Tensor or None required\)"):
        block.register_buffer("b", np.zeros(2))
    with pytest.raises(KeyError, match='contain ".", got: a.b'):
        block.register_buffer("a.b", zgrad.zeros(1))
    with pytest.raises(KeyError, match="be empty string"):
        block.register_buffer("", zgrad.zeros(1))
    with pytest.raises(KeyError, match="attribute 'fc' already exists"):
        block.register_buffer("fc", zgrad.zeros(1))
    with pytest.raises(TypeError, match="buffer name should be a string. Got int"):
        block.register_buffer(1, zgrad.zeros(1))
    with pytest.raises(TypeError, match="cannot assign 'Tensor' object to parameter 'p'"):
        block.register_parameter("p", zgrad.zeros(1))
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'scale'"):
        block.scale = zgrad.ones(4)
    with pytest.raises(TypeError, match="int is not a Module subclass"):
        block.add_module("m", 3)

    class Early(nn.Module):
        def __init__(self):
            self.register_buffer("b", zgrad.zeros(1))

    with pytest.raises(AttributeError, match=r"cannot assign buffer before Module.__init__\(\) call"):
        Early()


def test_delattr_removes_registered_members():
    block = make_block(zgrad).body[0]
    del block.running
    del block.fc
    assert "running" not in dict(block.named_buffers()) and not hasattr(block, "fc")
    with pytest.raises(AttributeError):
        del block.not_there


def test_assigning_a_parameter_over_a_buffer_moves_it():
    block = make_block(zgrad).body[0]
    block.running = nn.Parameter(zgrad.ones(4))
    assert "running" in dict(block.named_parameters(recurse=False))
    assert "running" not in dict(block.named_buffers(recurse=False))


# --- traversal, train/eval, apply -----------------------------------------------------------------

def test_children_and_modules_list_shared_modules_once():
    net = make_block(zgrad)
    assert [n for n, _ in net.named_children()] == ["body", "head", "extra"]
    assert list(net.children())[1] is net.head
    names = [n for n, _ in net.named_modules()]
    assert names == ["", "body", "body.0", "body.0.fc", "body.1", "body.2", "extra", "extra.0", "extra.1"]
    all_paths = [n for n, _ in net.named_modules(remove_duplicate=False)]
    assert "head" in all_paths and len(all_paths) == len(names) + 1
    params = [n for n, _ in net.named_parameters()]
    assert "head.weight" not in params and "body.2.weight" in params
    assert len(list(net.named_parameters(remove_duplicate=False))) == len(params) + 2


def test_train_and_eval_reach_every_descendant():
    net = make_block(zgrad)
    assert all(m.training for m in net.modules())
    assert net.eval() is net and not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    net.body.train(False)
    assert net.training and not net.body[0].fc.training
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        net.train("yes")


@pytest.mark.torch
def test_apply_visits_children_before_parents_like_torch():
    def visited(lib):
        order = []
        make_block(lib).apply(lambda m: order.append(type(m).__name__))
        return order

    order = visited(zgrad)
    assert order[0] == "Linear" and order[-1] == "Net" and order.count("Linear") == 3  # the shared head is reached along both paths
    if torch is not None:
        assert order == visited(torch)


def test_apply_for_initialization():
    net = make_block(zgrad)

    def init(m):
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.weight, 0.5)
            nn.init.zeros_(m.bias)

    assert net.apply(init) is net
    assert np.all(net.body[0].fc.weight.numpy() == 0.5) and np.all(net.head.bias.numpy() == 0)


def test_zero_grad_and_requires_grad_():
    net = make_block(zgrad)
    net(zgrad.randn(2, 3)).sum().backward()
    grads = [p.grad for p in net.parameters()]
    assert all(g is not None for g in grads)
    net.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not np.any(p.grad.numpy()) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


# --- device and dtype ---------------------------------------------------------------------------

def test_double_and_float_convert_floating_params_and_buffers_only():
    net = make_block(zgrad)
    weight = net.body[0].fc.weight
    net(zgrad.randn(2, 3)).sum().backward()
    assert net.double() is net
    assert weight is net.body[0].fc.weight, "parameters stay the same objects (optimizers keep them)"
    assert weight.dtype == np.float64 and weight.grad.dtype == np.float64 and weight.requires_grad
    assert net.body[0].running.dtype == np.float64 and net.body[0].count.dtype == np.int64
    out = net(zgrad.randn(2, 3, dtype=np.float64))
    assert out.dtype == np.float64
    net.float()
    assert weight.dtype == np.float32 and net.body[0].running.dtype == np.float32


def test_to_forms_and_errors():
    net = make_block(zgrad)
    assert net.to("cpu") is net and net.cpu() is net and net.to(zgrad.device("cpu")) is net
    net.to(zgrad.float64)
    assert net.head.weight.dtype == np.float64
    net.to("cpu", np.float32)
    assert net.head.weight.dtype == np.float32
    net.to(zgrad.zeros(1, dtype=np.float64))
    assert net.head.weight.dtype == np.float64
    net.to(dtype=np.float32)
    assert net.head.weight.dtype == np.float32
    with pytest.raises(TypeError, match="nn.Module.to only accepts floating point or complex dtypes, but got desired dtype=int64"):
        net.to(zgrad.int64)
    with pytest.raises(zgrad.ZgradError, match="invalid device ordinal" if zgrad.cuda.is_available() else "CUDA"):
        net.to("cuda:3")
    assert net.head.weight.dtype == np.float32 and not net.head.weight.is_cuda, "a failed move changes nothing"
    if zgrad.cuda.is_available():  # the simulator, in this test session (see conftest.py)
        assert net.cuda() is net and net.head.weight.is_cuda and net.body[0].running.is_cuda
        assert net.to("cpu") is net and not net.head.weight.is_cuda


# --- repr ---------------------------------------------------------------------------------------

@pytest.mark.torch
def test_repr_matches_torch():
    def model(lib):
        return lib.nn.Sequential(
            lib.nn.Linear(2, 3), lib.nn.ReLU(inplace=True), lib.nn.ReLU(), lib.nn.Flatten(), lib.nn.Identity(),
            lib.nn.ModuleList([lib.nn.Tanh()]), lib.nn.ModuleDict({"act": lib.nn.Sigmoid()}),
        )

    text = repr(model(zgrad))
    assert "(1): ReLU(inplace=True)" in text and "(2): ReLU()" in text and "Flatten(start_dim=1, end_dim=-1)" in text
    if torch is not None:
        assert text == repr(model(torch))


# --- containers ---------------------------------------------------------------------------------

def test_sequential_indexing_slicing_and_editing():
    a, b, c = nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1)
    seq = nn.Sequential(a, b, c)
    assert seq[-1] is c and seq[0] is a
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2 and head[1] is b
    x = zgrad.randn(3, 2)
    np.testing.assert_array_equal(head(x).numpy(), b(a(x)).numpy())
    seq.append(nn.Sigmoid())
    assert len(seq) == 4 and [n for n, _ in seq.named_children()] == ["0", "1", "2", "3"]
    del seq[1]
    assert [type(m).__name__ for m in seq] == ["Linear", "Linear", "Sigmoid"]
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2"], "renumbered as PyTorch does"
    seq[0] = nn.Tanh()
    assert isinstance(seq[0], nn.Tanh)
    seq.insert(1, nn.ReLU())
    assert isinstance(seq[1], nn.ReLU) and len(seq) == 4
    assert isinstance(seq.pop(1), nn.ReLU) and len(seq) == 3
    with pytest.raises(IndexError, match="index 5 is out of range for Sequential of length 3"):
        seq[5]
    with pytest.raises(TypeError, match="Sequential expects Modules, got int"):
        seq.append(3)


@pytest.mark.torch
def test_sequential_from_ordered_dict_keeps_names():
    seq = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 3)), ("act", nn.ReLU())]))
    assert [n for n, _ in seq.named_parameters()] == ["fc.weight", "fc.bias"]
    assert seq.fc is seq[0] and isinstance(seq[1:][0], nn.ReLU)
    assert [n for n, _ in seq[1:].named_children()] == ["act"]
    if torch is not None:
        ref = torch.nn.Sequential(OrderedDict([("fc", torch.nn.Linear(2, 3)), ("act", torch.nn.ReLU())]))
        assert list(seq.state_dict()) == list(ref.state_dict())


@pytest.mark.torch
def test_module_list():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(layers) == 3 and len(list(layers.parameters())) == 6
    assert [n for n, _ in layers.named_parameters()][:2] == ["0.weight", "0.bias"]
    layers.append(nn.ReLU())
    layers.extend([nn.Tanh()])
    layers += [nn.Sigmoid()]
    assert [type(m).__name__ for m in layers][3:] == ["ReLU", "Tanh", "Sigmoid"]
    assert isinstance(layers[-2:], nn.ModuleList) and len(layers[-2:]) == 2
    del layers[0]
    assert len(layers) == 5 and [n for n, _ in layers.named_children()] == ["0", "1", "2", "3", "4"]
    both = layers + nn.ModuleList([nn.Identity()])
    assert len(both) == 6
    with pytest.raises(NotImplementedError, match="ModuleList must implement forward"):
        layers(zgrad.ones(1))
    if torch is not None:
        ref = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)])
        mine = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
        assert list(mine.state_dict()) == list(ref.state_dict())


def test_module_dict():
    d = nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.ReLU()})
    assert list(d) == ["a", "b"] and "a" in d and len(d) == 2
    d["c"] = nn.Tanh()
    d.update([("d", nn.Identity())])
    assert list(d.keys()) == ["a", "b", "c", "d"]
    assert [n for n, _ in d.named_parameters()] == ["a.weight", "a.bias"]
    assert isinstance(d.pop("b"), nn.ReLU) and "b" not in d
    del d["c"]
    assert list(d) == ["a", "d"] and dict(d.items())["a"] is d["a"]
    with pytest.raises(TypeError, match="ModuleDict update sequence element #0 should be a \\(name, module\\) pair"):
        d.update([3])
    d.clear()
    assert len(d) == 0


# --- small layers ---------------------------------------------------------------------------------

def test_flatten_and_identity_layers():
    check(lambda lib, x: lib.nn.Flatten()(x), [(2, 3, 4)])
    check(lambda lib, x: lib.nn.Flatten(0, 1)(x), [(2, 3, 4)])
    check(lambda lib, x: lib.nn.Flatten(start_dim=-2)(x) * 2, [(2, 3, 4)])
    check(lambda lib, x: lib.nn.Identity(3, unused=True)(x) * 3, [(2, 3)])
    assert nn.Flatten()(zgrad.ones(5, 2, 3)).shape == (5, 6)


@pytest.mark.torch
def test_relu_inplace_overwrites_its_input_and_keeps_gradients():
    check(lambda lib, x: lib.nn.ReLU(inplace=True)(x * 1.5), [(3, 4)])
    x = zgrad.tensor([-1.0, 2.0, -3.0])
    out = nn.ReLU(inplace=True)(x)
    assert out is x and x.tolist() == [0.0, 2.0, 0.0]
    with pytest.raises(zgrad.errors.AutogradError, match="a leaf Variable that requires grad"):
        nn.ReLU(inplace=True)(zgrad.ones(2, requires_grad=True))
    if torch is not None:
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            torch.nn.ReLU(inplace=True)(torch.ones(2, requires_grad=True))


def test_linear_without_bias_registers_none():
    layer = nn.Linear(3, 2, bias=False)
    assert layer.bias is None and [n for n, _ in layer.named_parameters()] == ["weight"]
    assert list(layer.state_dict()) == ["weight"]
    assert "bias=False" in repr(layer)


def test_parameter_repr_and_default():
    p = nn.Parameter(zgrad.ones(2))
    assert repr(p).startswith("Parameter containing:\ntensor(") and p.requires_grad
    assert nn.Parameter().shape == (0,)


@pytest.mark.torch
def test_torch_module_matches_after_loading_state():
    require_torch()
    mine, ref = make_block(zgrad), make_block(torch)
    mine.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(mine(zgrad.tensor(x)).numpy(), ref(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


LAYERS_NAMED_IN_ERRORS = [
    (lambda: nn.Conv2d(3, 4, 3), (2, 3, 6, 6), (2, 5, 6, 6)),
    (lambda: nn.BatchNorm2d(3), (2, 3, 4, 4), (2, 5, 4, 4)),
    (lambda: nn.LayerNorm(4), (2, 3, 4), (2, 3, 5)),
    (lambda: nn.GroupNorm(1, 3), (2, 3, 4), (2, 5, 4)),
    (lambda: nn.MaxPool2d(2), (1, 3, 4, 4), (3, 4)),
    (lambda: nn.AvgPool2d(2), (1, 3, 4, 4), (3, 4)),
    (lambda: nn.AdaptiveAvgPool2d(2), (1, 3, 4, 4), (3, 4)),
]


@pytest.mark.parametrize("make, good_shape, bad_shape", LAYERS_NAMED_IN_ERRORS,
                         ids=[type(make()).__name__ for make, _, _ in LAYERS_NAMED_IN_ERRORS])
def test_layers_format_their_name_only_when_an_error_is_raised(make, good_shape, bad_shape, monkeypatch):
    """A forward that succeeds does not build the layer's name (it cost ~4 us a call); an error
    still starts with it."""
    layer = make()
    calls = []
    original = type(layer).extra_repr
    monkeypatch.setattr(type(layer), "extra_repr", lambda self: calls.append(1) or original(self))
    layer(zgrad.randn(*good_shape))
    assert not calls
    name = repr(layer)
    with pytest.raises((RuntimeError, ValueError)) as error:
        layer(zgrad.randn(*bad_shape))
    assert str(error.value).startswith(name + ": "), str(error.value)
    with pytest.raises(TypeError, match=rf"^{type(layer).__name__}\(.*\): argument 'input' expects a Tensor"):
        layer([1.0])


@pytest.mark.torch
def test_module_lists_fold_repeats_in_their_repr_as_torch():
    torch = pytest.importorskip("torch")

    def text(lib):
        nn = lib.nn
        blocks = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.ReLU(), nn.Sequential(nn.Linear(2, 3)),
                                nn.Sequential(nn.Linear(2, 3)), nn.Linear(2, 2)])
        holder = nn.Module()
        holder.layers = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
        return [repr(blocks), repr(nn.ModuleList()), repr(nn.ModuleList([nn.ReLU()])), repr(holder)]
    assert text(zgrad) == text(torch)


def test_a_value_that_is_not_a_tensor_is_named_in_the_load_error():
    net = zgrad.nn.Linear(1, 1)
    with pytest.raises(RuntimeError, match='While copying the parameter named "weight", expected zgrad.Tensor or '
                                           "Tensor-like object from checkpoint but received <class 'list'>"):
        net.load_state_dict({"weight": [[1.0]], "bias": zgrad.zeros(1)})


_SUBMODULE_CALLS = [
    'm.get_submodule("1.5")', 'm.get_submodule("0.weight")', 'm.get_submodule("x")',
    'tuple(m.get_parameter("1.1.weight").shape)', 'm.get_parameter("1.1.nope")', 'm.get_parameter("buf")',
    'm.get_buffer("buf").tolist()', 'm.get_buffer("0.weight")', 'm.get_buffer("0.nobuf")',
    'm.get_parameter("2.weight")', 'm.set_submodule("1.0", lib.nn.Tanh())', 'm.set_submodule("1.9", lib.nn.Tanh())',
    'm.set_submodule("", lib.nn.Tanh())',
    'm.set_submodule("0.weight", lib.nn.Tanh())', 'm.set_submodule("1.0", 3)',
    'm.set_submodule("1.7", lib.nn.Tanh(), strict=True)', 'm.set_submodule("5.7", lib.nn.Tanh())',
]


def _submodule_calls(lib):
    m = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.Sequential(lib.nn.ReLU(), lib.nn.Linear(2, 3)))
    m.register_buffer("buf", lib.ones(1))
    out = [repr(m.get_submodule("1.1"))]
    for call in _SUBMODULE_CALLS:
        try:
            out.append((call, repr(eval(call))))  # noqa: S307 - the test's own expressions
        except Exception as error:  # noqa: BLE001 - the type and message are what is compared
            out.append((call, type(error).__name__, str(error).replace("torch", "X").replace("zgrad", "X")))
    out.append(repr(m))
    return out


@pytest.mark.torch
def test_get_and_set_submodule_parameter_and_buffer_as_torchs():
    torch = require_torch()
    assert _submodule_calls(zgrad) == _submodule_calls(torch)


def _state_dict_hooks_and_extra_state(lib):
    log = []

    class Counter(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.steps = lib.nn.Linear(2, 2), 3

        def get_extra_state(self):
            return {"steps": self.steps}

        def set_extra_state(self, state):
            self.steps = state["steps"]

    def rename(module, state_dict, prefix, metadata, strict, missing, unexpected, errors):
        log.append(("load pre", prefix, strict))
        if prefix + "old_weight" in state_dict:
            state_dict[prefix + "weight"] = state_dict.pop(prefix + "old_weight")

    def forgive_bias(module, keys):
        log.append(("load post", type(module).__name__, list(keys.missing_keys), list(keys.unexpected_keys)))
        if "1.bias" in keys.missing_keys:
            keys.missing_keys.remove("1.bias")

    def attempt(call):
        try:
            call()
        except Exception as error:  # noqa: BLE001 - the type and last line are what is compared
            kind = "RuntimeError" if isinstance(error, RuntimeError) else type(error).__name__
            log.append((kind, str(error).split("\n")[-1]))

    m = lib.nn.Sequential(Counter(), lib.nn.Linear(2, 1))
    m.register_state_dict_pre_hook(lambda module, prefix, keep: log.append(("pre", type(module).__name__, prefix)))
    m[0].register_state_dict_pre_hook(lambda module, prefix, keep: log.append(("pre", type(module).__name__, prefix)))
    m[0].register_state_dict_post_hook(lambda module, sd, prefix, metadata: log.append(("post", prefix, sorted(sd))))
    saved = m.state_dict()
    log += [sorted(saved), saved["0._extra_state"]]
    m[0].steps = 9
    m[1].register_load_state_dict_pre_hook(rename)
    m.register_load_state_dict_post_hook(forgive_bias)
    renamed = dict(saved)
    renamed["1.old_weight"] = renamed.pop("1.weight")
    del renamed["1.bias"]
    result = m.load_state_dict(renamed)
    log += [repr(result).replace("_IncompatibleKeys", "IncompatibleKeys"), m[0].steps, "1.old_weight" in renamed]
    attempt(lambda: m.load_state_dict({k: v for k, v in saved.items() if k != "0._extra_state"}))
    returns = lib.nn.Linear(1, 1)
    returns.register_load_state_dict_post_hook(lambda module, keys: 5)
    attempt(lambda: returns.load_state_dict(returns.state_dict()))
    attempt(lambda: lib.nn.Linear(1, 1).load_state_dict({"weight": lib.ones(1, 1), "bias": lib.ones(1),
                                                          "_extra_state": 1}))
    return log


@pytest.mark.torch
def test_state_dict_hooks_and_extra_state_as_torchs():
    """Save pre/post hooks, load pre-hooks renaming a key, post-hooks clearing a missing key before
    strict judges it, get_extra_state/set_extra_state under _extra_state, and the errors."""
    torch = require_torch()
    assert _state_dict_hooks_and_extra_state(zgrad) == _state_dict_hooks_and_extra_state(torch)
