"""What a PyTorch user reads of the autograd graph and of ``.grad``, against torch 2.13: node names
and types, ``next_functions`` (a number operand listed, a dim argument not, a user Function's
tensors only), the non-leaf ``.grad`` warning, ``del t.grad``; and device-type checks and the loss
broadcasting warning."""

from __future__ import annotations

import warnings

import pytest

import zgrad
from helpers import require_torch


def graph(lib):
    x = lib.ones(2, requires_grad=True)
    y = lib.ones(2, requires_grad=True)

    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, k, b, flag):
            return a * k + b

        @staticmethod
        def backward(ctx, grad):
            return grad, None, grad, None

    results = [x + 2, 2 * x, x - 1, x / 2, 1 + x, (x * x).sum(), x * y,
               lib.nn.functional.mse_loss(x, y), Scale.apply(x, 2.0, y, True)]
    described = []
    for result in results:
        node = result.grad_fn
        described.append((type(node).__name__, node.name(),
                          [None if n is None else type(n).__name__ for n, _ in node.next_functions]))
    return described


@pytest.mark.torch
def test_nodes_and_next_functions_read_as_torchs():
    torch = require_torch()
    got, expected = graph(zgrad), graph(torch)
    renamed = {"PointwiseLossBackward0": "MseLossBackward0"}  # zgrad's node for mse_loss is shared by l1_loss
    assert [(renamed.get(a, a), renamed.get(b, b), c) for a, b, c in got] == expected


@pytest.mark.torch
def test_the_grad_of_a_non_leaf_warns_as_torchs():
    torch = require_torch()
    for lib in (zgrad, torch):
        leaf = lib.ones(2, requires_grad=True)
        inner = leaf * 2
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert inner.grad is None and leaf.grad is None
        assert len(caught) == 1 and "is not a leaf Tensor is being accessed" in str(caught[0].message)
        assert caught[0].filename == __file__
        inner.retain_grad()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert inner.grad is None
        inner.sum().backward()
        del leaf.grad
        assert leaf.grad is None


def test_device_objects_name_pytorchs_device_types_only():
    assert str(zgrad.device("mps")) == "mps" and zgrad.device("cuda", 1) == "cuda:1"
    for bad in ("gpu", "CPU"):
        with pytest.raises(RuntimeError, match=f"device type at start of device string: {bad}"):
            zgrad.device(bad)


def test_losses_warn_when_the_target_broadcasts():
    for loss in (zgrad.nn.functional.mse_loss, zgrad.nn.functional.l1_loss, zgrad.nn.functional.huber_loss,
                 zgrad.nn.functional.smooth_l1_loss):
        with pytest.warns(UserWarning, match=r"Using a target size \(zgrad.Size\(\[3\]\)\) that is different to the "
                                             r"input size \(zgrad.Size\(\[3, 1\]\)\)"):
            loss(zgrad.ones(3, 1), zgrad.ones(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zgrad.nn.functional.kl_div(zgrad.ones(3, 1), zgrad.ones(3), reduction="sum")
