"""The modules added for PyTorch programs, against torch's: constructor arguments, reprs,
state_dict keys, initialization, forward and backward (ConvTranspose2d, InstanceNorm, PReLU, ELU,
padding, PixelShuffle, Upsample, the new losses, CosineSimilarity, Unflatten, RNN / RNNCell, and
RNN, LSTM and GRU on packed sequences); ``nn.utils.rnn``; ``nn.init.orthogonal_`` and
``trunc_normal_``; the ``zgrad.nn.modules`` paths."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

import zgrad
from helpers import torch
from zgrad import nn
from zgrad.nn.init import _normal_quantile
from zgrad.nn.utils import rnn as zrnn

RNG = np.random.default_rng(0)


def _load(torch_module, zgrad_module):
    """Give the zgrad module the torch module's parameters and buffers."""
    zgrad_module.load_state_dict({k: zgrad.tensor(v.numpy()) for k, v in torch_module.state_dict().items()})


def _flat(result):
    if isinstance(result, (tuple, list)):
        return [t for item in result for t in _flat(item)]
    return [result.data if type(result).__name__ == "PackedSequence" else result]


def _same_forward_backward(torch_module, zgrad_module, torch_args, zgrad_args, rtol=1e-9, atol=1e-11):
    """Outputs and every parameter's gradient (of a random weighting of the outputs) agree."""
    outs_t, outs_z = _flat(torch_module(*torch_args)), _flat(zgrad_module(*zgrad_args))
    assert len(outs_t) == len(outs_z)
    loss_t = loss_z = 0
    for a, b in zip(outs_t, outs_z):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=rtol, atol=atol)
        weights = RNG.standard_normal(tuple(a.shape))
        loss_t = loss_t + (a * torch.tensor(weights)).sum()
        loss_z = loss_z + (b * zgrad.tensor(weights)).sum()
    loss_t.backward()
    loss_z.backward()
    named_t, named_z = dict(torch_module.named_parameters()), dict(zgrad_module.named_parameters())
    assert list(named_t) == list(named_z)
    for name, p in named_t.items():
        np.testing.assert_allclose(named_z[name].grad.numpy(), p.grad.numpy(), rtol=rtol, atol=atol, err_msg=name)


MODULES = [
    ("ConvTranspose2d", (4, 6, 3), dict(stride=2, padding=1, output_padding=1, groups=2), (2, 4, 5, 5)),
    ("ConvTranspose2d", (3, 2, (2, 3)), dict(bias=False, dilation=2), (3, 4, 4)),
    ("InstanceNorm2d", (3,), dict(affine=True, track_running_stats=True), (2, 3, 4, 5)),
    ("InstanceNorm2d", (3,), {}, (3, 4, 5)),
    ("InstanceNorm1d", (3,), dict(affine=True), (2, 3, 6)),
    ("PReLU", (), {}, (2, 3, 4)),
    ("PReLU", (3,), dict(init=0.1), (2, 3, 4)),
    ("ELU", (0.5,), {}, (2, 3)),
    ("ReflectionPad2d", ((1, 2, 0, 1),), {}, (2, 3, 4, 5)),
    ("ReplicationPad2d", (2,), {}, (2, 3, 4, 5)),
    ("ZeroPad2d", ((1, 2, 3, 4),), {}, (2, 3, 4, 5)),
    ("ConstantPad2d", (2, 3.5), {}, (2, 3, 4, 5)),
    ("CircularPad2d", (1,), {}, (2, 3, 4, 5)),
    ("ReflectionPad1d", (2,), {}, (2, 3, 5)),
    ("ConstantPad1d", ((1, 0), -1.0), {}, (2, 5)),
    ("ZeroPad3d", (1,), {}, (1, 2, 3, 4)),
    ("PixelShuffle", (2,), {}, (2, 8, 3, 3)),
    ("PixelUnshuffle", (2,), {}, (2, 2, 4, 6)),
    ("Upsample", (), dict(scale_factor=2), (2, 3, 4, 5)),
    ("Upsample", (), dict(size=(5, 7), mode="bilinear", align_corners=False), (2, 3, 4, 5)),
    ("UpsamplingNearest2d", (), dict(scale_factor=3), (1, 2, 3, 3)),
    ("UpsamplingBilinear2d", (), dict(size=(6, 4)), (1, 2, 3, 3)),
    ("Unflatten", (1, (2, 3)), {}, (4, 6, 5)),
    ("RNN", (3, 4), dict(num_layers=2, bidirectional=True), (5, 2, 3)),
    ("RNN", (3, 4), dict(nonlinearity="relu", batch_first=True, bias=False), (2, 5, 3)),
    ("RNN", (3, 4), {}, (5, 3)),
    ("RNNCell", (3, 4), dict(nonlinearity="relu"), (2, 3)),
    ("RNNCell", (3, 4), {}, (3,)),
]


@pytest.mark.torch
@pytest.mark.parametrize("name, args, kwargs, shape", MODULES, ids=lambda v: v if isinstance(v, str) else "")
def test_module_matches_torch(name, args, kwargs, shape):
    torch_module = getattr(torch.nn, name)(*args, **kwargs).double()
    zgrad_module = getattr(nn, name)(*args, **kwargs).double()
    assert repr(zgrad_module) == repr(torch_module)
    assert list(zgrad_module.state_dict()) == list(torch_module.state_dict())
    _load(torch_module, zgrad_module)
    x = RNG.standard_normal(shape)
    inputs = [torch.tensor(x, requires_grad=True), zgrad.tensor(x, requires_grad=True)]
    _same_forward_backward(torch_module, zgrad_module, inputs[:1], inputs[1:])
    np.testing.assert_allclose(inputs[1].grad.numpy(), inputs[0].grad.numpy(), rtol=1e-9, atol=1e-11)
    for key, value in torch_module.state_dict().items():  # running statistics after a training step
        np.testing.assert_allclose(zgrad_module.state_dict()[key].numpy(), value.numpy(), rtol=1e-12, err_msg=key)


@pytest.mark.torch
@pytest.mark.parametrize("name, kwargs", [
    ("BCELoss", {}), ("BCELoss", dict(reduction="sum")), ("BCEWithLogitsLoss", {}),
    ("BCEWithLogitsLoss", dict(pos_weight=np.array([1.0, 2.0, 0.5]))), ("SmoothL1Loss", dict(beta=0.5)),
    ("HuberLoss", dict(delta=2.0, reduction="none")), ("KLDivLoss", dict(reduction="batchmean")),
    ("KLDivLoss", dict(reduction="sum", log_target=True)),
])
def test_loss_module_matches_torch(name, kwargs):
    def build(lib):
        converted = {k: lib.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        return getattr(lib.nn, name)(**converted)

    torch_loss, zgrad_loss = build(torch), build(zgrad)
    assert repr(zgrad_loss) == repr(torch_loss) or "reduction" in kwargs  # zgrad's repr names a reduction
    assert list(zgrad_loss.state_dict()) == list(torch_loss.state_dict())
    x, t = RNG.uniform(0.05, 0.95, (4, 3)), RNG.uniform(0, 1, (4, 3))
    outputs = []
    for lib, loss in ((torch, torch_loss), (zgrad, zgrad_loss)):
        xt = lib.tensor(x, requires_grad=True)
        out = loss(lib.log(xt) if name == "KLDivLoss" else xt, lib.tensor(t))
        out.sum().backward()
        outputs.append((out.detach().numpy(), xt.grad.numpy()))
    for a, b in zip(*outputs):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)


@pytest.mark.torch
def test_cosine_similarity_and_pairwise_distance_modules():
    x, y = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    for name, args in (("CosineSimilarity", (0,)), ("PairwiseDistance", (1.0, 1e-6, True))):
        expected = getattr(torch.nn, name)(*args)(torch.tensor(x), torch.tensor(y)).numpy()
        np.testing.assert_allclose(getattr(nn, name)(*args)(zgrad.tensor(x), zgrad.tensor(y)).numpy(), expected,
                                   rtol=1e-12)


def test_conv_transpose2d_output_size_and_init():
    zgrad.manual_seed(0)
    layer = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2)
    assert layer.weight.shape == (4, 3, 3, 3)
    bound = 1 / math.sqrt(3 * 9)  # fan_in from the weight's second dimension, as PyTorch
    assert np.abs(layer.weight.numpy()).max() <= bound and np.abs(layer.bias.numpy()).max() <= bound
    x = zgrad.randn(1, 4, 5, 5)
    assert layer(x).shape == (1, 6, 9, 9)
    assert layer(x, output_size=[10, 10]).shape == (1, 6, 10, 10)
    with pytest.raises(ValueError, match="requested an output size"):
        layer(x, output_size=(12, 12))
    with pytest.raises(ValueError, match='Only "zeros" padding mode'):
        nn.ConvTranspose2d(4, 6, 3, padding_mode="reflect")


def test_instance_norm_input_checks():
    with pytest.raises(ValueError, match=r"expected 3D or 4D input \(got 2D input\)"):
        nn.InstanceNorm2d(3)(zgrad.randn(2, 3))
    with pytest.raises(ValueError, match=r"to match num_features \(3\), but got: 4"):
        nn.InstanceNorm2d(3, affine=True)(zgrad.randn(2, 4, 3, 3))
    with pytest.warns(UserWarning, match="does not match num_features"):
        nn.InstanceNorm2d(3)(zgrad.randn(2, 4, 3, 3))


def test_flatten_parameters_is_a_no_op():
    lstm = nn.LSTM(3, 4)
    before = [p.numpy().copy() for p in lstm.parameters()]
    assert lstm.flatten_parameters() is None
    for old, p in zip(before, lstm.parameters()):
        np.testing.assert_array_equal(old, p.numpy())


def test_rnn_errors():
    with pytest.raises(ValueError, match="Unknown nonlinearity 'foo'"):
        nn.RNN(3, 4, nonlinearity="foo")
    with pytest.raises(ValueError, match="Unknown nonlinearity 'foo'"):
        nn.RNNCell(3, 4, nonlinearity="foo")
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size"):
        nn.RNN(3, 4)(zgrad.randn(5, 2, 2))


@pytest.mark.torch
@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("kwargs", [{}, dict(num_layers=2, bidirectional=True), dict(batch_first=True, bias=False)],
                         ids=["plain", "2_layers_bidirectional", "batch_first_no_bias"])
@pytest.mark.parametrize("with_state", [False, True], ids=["zero_state", "given_state"])
def test_recurrent_layer_on_packed_sequence_matches_torch(name, kwargs, with_state):
    torch_module = getattr(torch.nn, name)(3, 4, **kwargs).double()
    zgrad_module = getattr(nn, name)(3, 4, **kwargs).double()
    _load(torch_module, zgrad_module)
    batch_first = kwargs.get("batch_first", False)
    x = RNG.standard_normal((3, 5, 3) if batch_first else (5, 3, 3))
    lengths = [2, 5, 3]
    packed = [lib.nn.utils.rnn.pack_padded_sequence(lib.tensor(x), lengths, batch_first=batch_first,
                                                    enforce_sorted=False) for lib in (torch, zgrad)]
    args_t, args_z = [packed[0]], [packed[1]]
    if with_state:
        h = RNG.standard_normal((kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1), 3, 4))
        states = [(lib.tensor(h), lib.tensor(2 * h)) if name == "LSTM" else lib.tensor(h) for lib in (torch, zgrad)]
        args_t.append(states[0])
        args_z.append(states[1])
    _same_forward_backward(torch_module, zgrad_module, args_t, args_z)


@pytest.mark.torch
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [False, True])
def test_pack_and_pad_round_trip_matches_torch(batch_first, enforce_sorted):
    lengths = [5, 3, 2] if enforce_sorted else [2, 5, 3]
    sequences = [RNG.standard_normal((n, 3)) for n in lengths]
    results = {}
    for lib in (torch, zgrad):
        utils = lib.nn.utils.rnn
        tensors = [lib.tensor(s, requires_grad=True) for s in sequences]
        padded = utils.pad_sequence(tensors, batch_first=batch_first, padding_value=-1.0)
        packed = utils.pack_padded_sequence(padded, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
        unpacked, out_lengths = utils.pad_packed_sequence(packed, batch_first=batch_first, padding_value=7.0,
                                                          total_length=6)
        (unpacked * lib.tensor(np.arange(unpacked.numel()).reshape(tuple(unpacked.shape)) * 1.0)).sum().backward()
        results[lib.__name__] = (padded.detach().numpy(), packed.data.detach().numpy(), packed.batch_sizes.tolist(),
                                 unpacked.detach().numpy(), out_lengths.tolist(), [t.grad.numpy() for t in tensors])
    for a, b in zip(results["zgrad"], results["torch"]):
        for x, y in zip(a, b) if isinstance(a, list) and a and isinstance(a[0], np.ndarray) else [(a, b)]:
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.torch
def test_pad_sequence_left_and_pack_sequence_match_torch():
    sequences = [RNG.standard_normal((n, 2)) for n in (2, 4, 3)]
    left = [lib.nn.utils.rnn.pad_sequence([lib.tensor(s) for s in sequences], padding_side="left").numpy()
            for lib in (torch, zgrad)]
    np.testing.assert_array_equal(left[1], left[0])
    packed = [lib.nn.utils.rnn.pack_sequence([lib.tensor(s) for s in sequences], enforce_sorted=False)
              for lib in (torch, zgrad)]
    np.testing.assert_array_equal(packed[1].data.numpy(), packed[0].data.numpy())
    assert packed[1].sorted_indices.tolist() == packed[0].sorted_indices.tolist()
    assert packed[1].unsorted_indices.tolist() == packed[0].unsorted_indices.tolist()


def test_packing_errors():
    padded = zgrad.randn(4, 3, 2)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        zrnn.pack_padded_sequence(padded, [2, 4, 3])
    with pytest.raises(RuntimeError, match="has to be greater than 0"):
        zrnn.pack_padded_sequence(padded, [4, 3, 0])
    packed = zrnn.pack_padded_sequence(padded, [4, 3, 2])
    with pytest.raises(ValueError, match="total_length=3"):
        zrnn.pad_packed_sequence(packed, total_length=3)
    with pytest.raises(ValueError, match="padding_side"):
        zrnn.pad_sequence([padded[0]], padding_side="middle")


@pytest.mark.parametrize("shape", [(3, 5), (6, 2, 2), (4, 4)])
def test_orthogonal_init(shape):
    zgrad.manual_seed(0)
    weight = nn.init.orthogonal_(zgrad.empty(*shape), gain=2.0)
    flat = weight.numpy().reshape(shape[0], -1).astype(np.float64)
    gram = flat @ flat.T if flat.shape[0] <= flat.shape[1] else flat.T @ flat
    np.testing.assert_allclose(gram, 4 * np.eye(gram.shape[0]), atol=1e-5)
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions"):
        nn.init.orthogonal_(zgrad.empty(3))


def test_trunc_normal_init():
    zgrad.manual_seed(0)
    values = nn.init.trunc_normal_(zgrad.empty(100_000, dtype=zgrad.float64), mean=1.0, std=1.0, a=0.5, b=1.5).numpy()
    assert values.min() >= 0.5 and values.max() <= 1.5
    # the mean and standard deviation of N(1, 1) truncated to [0.5, 1.5]: 1 and 0.2842
    assert abs(values.mean() - 1.0) < 0.005 and abs(values.std() - 0.2842) < 0.005
    small = nn.init.trunc_normal_(zgrad.empty(100_000), std=0.02).numpy()
    assert small.dtype == np.float32 and abs(small.std() - 0.02) < 0.001


def test_normal_quantile_matches_statistics():
    p = np.array([1e-12, 1e-5, 0.01, 0.02425, 0.3, 0.5, 0.77, 0.98, 1 - 1e-9])
    expected = [statistics.NormalDist().inv_cdf(v) for v in p]
    np.testing.assert_allclose(_normal_quantile(p), expected, rtol=2e-9, atol=1e-12)


@pytest.mark.torch
def test_module_paths_re_export_the_classes():
    for sub in ("linear", "conv", "activation", "container", "dropout", "normalization", "batchnorm", "rnn", "sparse",
                "pooling", "loss", "padding", "flatten", "pixelshuffle", "upsampling", "distance", "instancenorm",
                "module", "transformer", "fold", "channelshuffle", "adaptive", "lazy"):
        module = getattr(nn.modules, sub)
        assert module.__all__
        for name in module.__all__:
            assert getattr(module, name) is getattr(nn, name, getattr(module, name))  # (LazyModuleMixin: not in nn)
            assert name in getattr(torch.nn.modules, sub).__all__, f"torch.nn.modules.{sub} has no {name}"
        theirs = getattr(torch.nn.modules, sub)
        missing = {name for name in theirs.__all__ if isinstance(getattr(theirs, name), type)
                   and issubclass(getattr(theirs, name), torch.nn.Module) and not hasattr(module, name)}
        # SyncBatchNorm is zgrad.nn.SyncBatchNorm (the distributed layer); the others zgrad lacks
        assert missing <= {"SyncBatchNorm", "Container", "LinearCrossEntropyLoss", "CrossMapLRN2d"}, (sub, missing)
    from zgrad.nn.modules.linear import Linear
    assert Linear is nn.Linear and nn.modules.Linear is nn.Linear


@pytest.mark.torch
def test_top_level_forms_match_torch():
    x, w = RNG.standard_normal((2, 4, 3, 3)), RNG.standard_normal((4, 2, 3, 3))
    a, b = RNG.standard_normal((3, 5)), RNG.standard_normal((3, 5))
    for name, args in (("conv_transpose2d", (x, w)), ("cosine_similarity", (a, b)), ("pairwise_distance", (a, b)),
                       ("pixel_shuffle", (x, 2)), ("pixel_unshuffle", (RNG.standard_normal((1, 2, 4, 4)), 2)),
                       ("prelu", (x, np.array([0.1, 0.2, 0.3, 0.4])))):
        results = [getattr(lib, name)(*(lib.tensor(v) if isinstance(v, np.ndarray) else v for v in args)).numpy()
                   for lib in (torch, zgrad)]
        np.testing.assert_allclose(results[1], results[0], rtol=1e-10, atol=1e-12, err_msg=name)
    slopes = np.array([0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(zgrad.tensor(x).prelu(zgrad.tensor(slopes)).numpy(),
                               torch.tensor(x).prelu(torch.tensor(slopes)).numpy(), rtol=1e-12)
