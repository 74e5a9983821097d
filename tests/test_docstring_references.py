"""Docstrings that point at zgrad's own code (``:mod:`zgrad.kernels.cpu_sequence```,
``:func:`zgrad.ops.conv.conv2d```, ...) point at something that exists."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

from zgrad.errors import ZgradError

PACKAGE = Path(__file__).resolve().parent.parent / "zgrad"
REFERENCE = re.compile(r":(?:mod|func|class|meth|data|attr|exc):`~?(zgrad(?:\.\w+)+)`")
SOURCES = sorted(PACKAGE.rglob("*.py"))


def resolve(dotted: str) -> Any:
    """The object ``dotted`` names (the longest importable module prefix, then attributes), or None."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        module = ".".join(parts[:split])
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if found:
            try:
                target: Any = importlib.import_module(module)
            except (ImportError, ZgradError):  # it exists but needs an optional extra or a device (CUDA)
                return module
            for attribute in parts[split:]:
                target = getattr(target, attribute, None)
            return target
    return None


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_docstring_references_resolve(path: Path):
    missing = [ref for ref in REFERENCE.findall(path.read_text(encoding="utf-8")) if resolve(ref) is None]
    assert not missing, f"{path.name} refers to what does not exist: {missing}"


def test_resolver_finds_a_missing_module():
    assert resolve("zgrad.kernels.cpu_sequence.lstm_forward") is not None
    assert resolve("zgrad.kernels.cpu_recurrent") is None
    assert resolve("zgrad.kernels.cpu_norm.task_count") is None
