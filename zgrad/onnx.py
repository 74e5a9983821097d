"""``zgrad.onnx``: the name of PyTorch's ONNX exporter, so that programs importing it (pytorch/examples'
word_language_model does, to export when asked) run; zgrad has no ONNX exporter.
"""

from __future__ import annotations

from typing import Any

__all__ = ["export"]


def export(model: Any, args: Any = (), f: Any = None, **kwargs: Any) -> None:
    """Raises: zgrad cannot write ONNX graphs.

    Raises:
        NotImplementedError: always; the message says how to get an ONNX file from a zgrad model.
    """
    raise NotImplementedError(f"zgrad cannot export {type(model).__name__} to ONNX: it has no ONNX exporter. "
                              "Save the model's state_dict() with zgrad.save, load it into the same model built with "
                              "PyTorch (safetensors.torch.load_file reads zgrad's files) and export that with "
                              "torch.onnx.export")
