"""PyTorch's older API that tutorials still use: ``autograd.Variable``, ``torch.svd``,
``torch.functional``, and the error a bad device string raises."""

from __future__ import annotations

import numpy as np
import pytest

import zgrad
from helpers import require_torch


def test_variable_is_every_tensor_and_makes_a_new_leaf():
    from zgrad.autograd import Variable
    t = zgrad.ones(2)
    v = Variable(t, requires_grad=True)
    assert v is not t and v.requires_grad and v.is_leaf and not t.requires_grad
    assert isinstance(t, Variable) and not isinstance([1.0], Variable)
    v.sum().backward()
    assert v.grad.tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        Variable([1.0, 2.0])
    with pytest.warns(UserWarning, match="volatile was removed"):
        Variable(t, volatile=True)


@pytest.mark.torch
@pytest.mark.parametrize("arguments", [{}, {"some": False}, {"compute_uv": False}])
def test_svd_is_torchs(arguments):
    torch = require_torch()
    matrix = np.random.default_rng(0).standard_normal((2, 4, 3))
    results = []
    for lib in (zgrad, torch):
        x = lib.tensor(matrix, requires_grad=True)
        u, s, v = lib.svd(x, **arguments)
        s.sum().backward()
        results.append(([tuple(t.shape) for t in (u, s, v)], s.detach().numpy(), x.grad.numpy(),
                        float(u.abs().sum()) if not arguments.get("compute_uv", True) else None))
        if arguments.get("compute_uv", True):
            k = s.shape[-1]
            np.testing.assert_allclose(((u[..., :k] * s.unsqueeze(-2)) @ v.mT).detach().numpy(), matrix, rtol=1e-10)
    (shapes, values, grads, zeros), (torch_shapes, torch_values, torch_grads, torch_zeros) = results
    assert shapes == torch_shapes and zeros == torch_zeros
    np.testing.assert_allclose(values, torch_values, rtol=1e-12)
    np.testing.assert_allclose(grads, torch_grads, rtol=1e-10)
    assert type(zgrad.ones(2, 2).svd()).__name__ == "svd"


def test_functional_holds_the_tensor_functions_themselves():
    import zgrad.functional as functional
    for name in functional.__all__:
        assert getattr(functional, name) is getattr(zgrad, name), name


def test_a_bad_device_string_is_a_runtime_error_as_in_torch():
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda device type at start of device string: gpu"):
        zgrad.rand(2, device="gpu")
