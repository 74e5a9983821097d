"""pytorch/examples ``fast_neural_style``'s ``TransformerNet`` (ported in
``tests/support/examples_fast_neural_style/``: ``torch`` renamed to ``zgrad``; reflection padding,
affine ``InstanceNorm2d``, five residual blocks, nearest ``interpolate`` upsampling) trained a few
steps as ``neural_style.py``'s ``train`` trains it, with one change: the example compares VGG-16
features, which need torchvision's pretrained weights, so here the features are the images
themselves: a content loss (MSE against a target image) plus a weighted style loss (MSE between Gram
matrices, the example's ``utils.gram_matrix``). On zgrad alone it learns; from torch's initial
weights, in float64, every step's loss and the final weights are torch's."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from example_ports import comparable, load_module
from helpers import require_torch
from paths import SUPPORT

pytestmark = pytest.mark.timeout(300)

PORT = SUPPORT / "examples_fast_neural_style" / "neural_style" / "transformer_net.py"
STEPS, BATCH, SIZE = 4, 2, 16
# the example's lr is 1e-3, for images in [0, 255] and VGG features; on these images it overshoots (on torch too)
CONTENT_WEIGHT, STYLE_WEIGHT, LR = 1.0, 10.0, 1e-4


def images() -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """The batches (a dataset of one batch, one epoch a step: images and their targets, the
    images with their channels reversed and darkened) and one style image, all in [0, 1)."""
    rng = np.random.default_rng(0)
    x = rng.random((BATCH, 3, SIZE, SIZE))
    return [(x, 0.5 * x[:, ::-1].copy())] * STEPS, rng.random((1, 3, SIZE, SIZE))


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    gram = features.bmm(features_t) / (ch * h * w)
    return gram


def train(lib, transformer) -> list[float]:
    """neural_style.py's loop, on the images instead of their VGG features; each step's total loss."""
    optimizer = lib.optim.Adam(transformer.parameters(), LR)
    mse_loss = lib.nn.MSELoss()
    dtype = next(transformer.parameters()).dtype
    batches, style = images()
    gram_style = gram_matrix(lib.tensor(style, dtype=dtype).repeat(BATCH, 1, 1, 1))
    transformer.train()
    losses = []
    for x, target in batches:
        optimizer.zero_grad()
        y = transformer(lib.tensor(x, dtype=dtype))
        content_loss = CONTENT_WEIGHT * mse_loss(y, lib.tensor(target, dtype=dtype))
        style_loss = STYLE_WEIGHT * mse_loss(gram_matrix(y), gram_style)
        total_loss = content_loss + style_loss
        total_loss.backward()
        optimizer.step()
        losses.append(total_loss.item())
    return losses


def test_transformer_net_learns():
    net = load_module(PORT, zgrad).TransformerNet()
    losses = train(zgrad, net)
    assert losses[-1] < losses[0], losses
    out = net.eval()(zgrad.rand(1, 3, SIZE, SIZE))
    assert out.shape == (1, 3, SIZE, SIZE) and np.isfinite(out.detach().numpy()).all()


@pytest.mark.torch
def test_transformer_net_trains_as_on_torch():
    torch = require_torch()
    with comparable(torch) as expected:
        reference = load_module(PORT, torch).TransformerNet()
        expected_losses = train(torch, reference)
    with comparable(zgrad, expected.states) as got:
        net = load_module(PORT, zgrad).TransformerNet()
        losses = train(zgrad, net)
    assert got.losses == losses and expected.losses == expected_losses  # one backward a step
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-10)
    final = reference.state_dict()
    assert list(net.state_dict()) == list(final)
    # a convolution's bias before an InstanceNorm has a zero gradient but for rounding, which Adam
    # turns into full-size steps: those biases agree to the rounding's scaled size only
    for name, value in net.state_dict().items():
        np.testing.assert_allclose(value.numpy(), final[name].numpy(), rtol=1e-8, atol=1e-9, err_msg=name)
