"""zgrad's warnings point at the user's line, however deep in zgrad they are raised (PyTorch's do)."""

from __future__ import annotations

import warnings

import pytest

import zgrad
import zgrad.nn.functional as F

CALLS = {
    "F.softmax without dim": lambda: F.softmax(zgrad.ones(2, 3)),
    "nn.Softmax without dim": lambda: zgrad.nn.Softmax()(zgrad.ones(2, 3)),
    "dropout2d of a 2-D input": lambda: F.dropout2d(zgrad.ones(2, 3)),
    "meshgrid without indexing": lambda: zgrad.meshgrid(zgrad.ones(2), zgrad.ones(2)),
    "chain_matmul": lambda: zgrad.chain_matmul(zgrad.ones(2, 2), zgrad.ones(2, 2)),
}


@pytest.mark.parametrize("call", CALLS)
def test_the_warning_names_the_callers_file(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CALLS[call]()
    assert caught and all(w.filename == __file__ for w in caught), [(w.filename, w.lineno) for w in caught]
