"""The op test-suite on the CUDA backend: every case of the op test modules, run on CUDA (Numba's
simulator here) with a strict device check, output and gradients compared with the CPU backend.

The simulator runs one Python thread per CUDA thread, so the whole suite takes minutes: by default
a representative subset runs (every kernel family at least once); the others carry the ``full``
marker (``ZGRAD_TEST_FULL=1`` runs them: CI's full step).
"""

from __future__ import annotations

import pytest

import test_activations
import test_conv
import test_losses
import test_norm
import test_ops
import test_pool
import test_tensor_api
from cuda_helpers import check_device, requires_cuda

pytestmark = requires_cuda

SOURCES = {
    "ops": test_ops.CASES, "tensor_api": test_tensor_api.CASES, "conv": test_conv.CASES, "norm": test_norm.CASES,
    "pool": test_pool.CASES, "activations": test_activations.CASES, "class_losses": test_losses.CLASS_CASES,
    "probability_losses": test_losses.PROBABILITY_CASES, "pointwise_losses": test_losses.POINTWISE_CASES,
}
# The subset CI runs: at least one case of every kernel family.
SUBSET = {
    "ops": {"add_fn_broadcast", "rdiv_scalar", "pow_tensor", "matmul_3d_2d", "matmul_broadcast_batch",
            "activations_noncontiguous"},
    "conv": {"groups_stride_dilation", "reflect"},
    "norm": {"layer_norm_last", "layer_norm_two_dims", "layer_norm_no_affine", "layer_norm_weight_only"},
    "pool": set(),
    "class_losses": {"ce_label_smoothing_weight_ignore", "nll_weight_spatial"},
}


def _params() -> list:
    params = []
    for source, cases in SOURCES.items():
        for param in cases:
            c = param.values[0]
            marks = () if c.name in SUBSET.get(source, ()) else (pytest.mark.full,)
            params.append(pytest.param(c, id=f"{source}-{c.name}", marks=marks))
    return params


@pytest.mark.parametrize("c", _params())
def test_case_on_cuda_matches_cpu(c):
    check_device(c.fn, c.shapes, domain=c.domain)
