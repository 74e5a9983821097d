"""The layer rules of docs/architecture.md, checked on every module's imports (lazy ones included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "zgrad"

# Which zgrad layers each layer may import (lower never imports higher).
ALLOWED = {
    "errors": set(),
    "config": {"errors"},
    "transport": {"errors", "config", "transport"},
    "kernels": {"errors", "config", "kernels"},
    "engine": {"errors", "config", "kernels", "engine"},
    "core": {"errors", "config", "kernels", "engine", "core"},
    "distributed": {"errors", "config", "kernels", "engine", "core", "transport", "distributed"},
    "launch": {"errors", "config", "kernels", "engine", "core", "transport", "distributed", "launch"},
}
# Third-party packages only one layer may import.
EXCLUSIVE = {"numba": "kernels", "cuda": "kernels", "zmq": "transport"}
FORBIDDEN_IN = {"transport": {"numpy"}, "errors": {"numpy"}, "config": {"numpy"}}
NEVER = {"torch", "pickle"}  # torch is a test/benchmark reference only; pickle only behind an explicit opt-in


def layer_of(module: str) -> str:
    parts = module.split(".")
    if parts == ["zgrad"] or parts[1] in ("launch", "demo", "multiprocessing"):
        return "launch"
    if parts[1:3] == ["distributed", "run"]:  # torchrun's module name for the launcher's front end
        return "launch"
    if parts[1:3] == ["nn", "parallel"]:  # DistributedDataParallel: the distributed layer of docs/architecture.md
        return "distributed"
    if parts[1:4] == ["utils", "data", "distributed"]:  # DistributedSampler reads the process group
        return "distributed"
    if parts[1] in ("errors", "config", "transport", "kernels", "engine", "distributed"):
        return parts[1]
    return "core"


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
            if node.module == "zgrad":
                found.extend(f"zgrad.{alias.name}" for alias in node.names)
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_package_has_modules():
    assert len(MODULES) > 10


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_respect_layers(path: Path):
    name = module_name(path)
    layer = layer_of(name)
    problems = []
    for imported in imports_of(path):
        top = imported.split(".")[0]
        if top == "zgrad":
            if imported == "zgrad":
                continue
            target = layer_of(imported)
            if target not in ALLOWED[layer]:
                problems.append(f"{name} ({layer}) imports {imported} ({target})")
        elif top in EXCLUSIVE and EXCLUSIVE[top] != layer:
            problems.append(f"{name} ({layer}) imports {imported}: only the {EXCLUSIVE[top]} layer may")
        elif top in FORBIDDEN_IN.get(layer, set()) or top in NEVER:
            problems.append(f"{name} ({layer}) imports {imported}, which that layer must not")
    assert not problems, "\n".join(problems)


def test_nn_parallel_is_distributed_and_nn_does_not_import_it():
    assert layer_of("zgrad.nn.parallel.distributed") == "distributed"
    assert layer_of("zgrad.nn.layers") == "core"
    assert not any(i.startswith("zgrad.nn.parallel") for i in imports_of(PACKAGE / "nn" / "__init__.py"))


def test_distributed_sampler_is_distributed_and_utils_data_does_not_import_it():
    assert layer_of("zgrad.utils.data.distributed") == "distributed"
    assert layer_of("zgrad.utils.data.dataloader") == "core"
    package = PACKAGE / "utils" / "data"
    assert not any(i.startswith("zgrad.utils.data.distributed") for p in package.rglob("*.py")
                   if p.name != "distributed.py" for i in imports_of(p))


def test_checker_catches_a_forbidden_edge(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import zmq\nfrom zgrad.tensor import Tensor\n")
    assert imports_of(bad) == ["zmq", "zgrad.tensor"]
    assert "core" not in ALLOWED["engine"] and "core" not in ALLOWED["transport"]
