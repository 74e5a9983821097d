"""Modules kept for the PyTorch programs that import them, whose features zgrad has not:
``zgrad.backends.cudnn`` (switches, with no cuDNN to switch) and ``zgrad.onnx`` (no exporter)."""

from __future__ import annotations

import pytest

import zgrad


def test_backends_cudnn_switches_as_torch_without_cudnn():
    """Programs set ``cudnn.benchmark`` (pytorch/examples' dcgan); zgrad has no cuDNN to switch."""
    import zgrad.backends.cudnn as cudnn

    assert zgrad.backends.cudnn is cudnn and not cudnn.is_available() and cudnn.version() is None
    assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32) == (True, False, False, True)


def test_onnx_export_says_zgrad_has_no_exporter():
    """pytorch/examples' word_language_model imports ``torch.onnx`` and exports only when asked."""
    import zgrad.onnx

    with pytest.raises(NotImplementedError, match="zgrad cannot export Linear to ONNX: it has no ONNX exporter. "
                                                  "Save the model's state_dict"):
        zgrad.onnx.export(zgrad.nn.Linear(2, 2), (zgrad.ones(1, 2),), "model.onnx")
