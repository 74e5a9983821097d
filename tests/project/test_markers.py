"""Every test that names torch carries the ``torch`` marker (CI's torch step runs ``-m torch``).

Tests that reach torch only through a helper are caught at run time instead: without torch they
skip, and ``conftest.py`` fails a skip for torch that lacks the marker.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from paths import TESTS

TORCH_NAMES = {"torch", "require_torch"}


def unmarked_torch_tests(source: str) -> list[str]:
    """The test functions of ``source`` that use a name in :data:`TORCH_NAMES` without the marker."""
    found = []
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
            continue
        uses = any(isinstance(n, ast.Name) and n.id in TORCH_NAMES for n in ast.walk(node))
        if uses and not any("mark.torch" in ast.unparse(d) for d in node.decorator_list):
            found.append(node.name)
    return found


@pytest.mark.parametrize("path", sorted(TESTS.rglob("test_*.py")), ids=lambda p: str(p.relative_to(TESTS)))
def test_tests_that_use_torch_are_marked(path: Path):
    unmarked = unmarked_torch_tests(path.read_text(encoding="utf-8"))
    assert not unmarked, f"{path.name}: add @pytest.mark.torch to {unmarked}"


def test_the_check_finds_an_unmarked_test():
    source = "import pytest\n\ndef test_a():\n    torch = require_torch()\n\n@pytest.mark.torch\ndef test_b():\n    torch.ones(1)\n"
    assert unmarked_torch_tests(source) == ["test_a"]
