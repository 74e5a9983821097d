"""The layer rules of docs/architecture.md, checked on every module's imports (lazy ones included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from paths import PACKAGE


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
NEVER = {"torch", "pickle"}  # torch is a test/benchmark reference only; nothing is unpickled


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
    if parts[1:] in (["amp"], ["amp", "grad_scaler"]):  # GradScaler all-reduces its inf flag under DDP
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


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def runtime_imports_of(path: Path, modules: set[str]) -> set[str]:
    """The zgrad modules in ``modules`` that ``path`` imports when it runs (lazy imports inside
    functions included; ``if TYPE_CHECKING:`` blocks left out). ``from a.b import c`` imports
    the module ``a.b.c`` if there is one, else ``a.b``."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for statement in child.orelse:
                    visit_statement(statement)
                continue
            visit_statement(child)

    def visit_statement(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
        visit(node)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {name for name in found if name in modules}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return circles


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


# The import circles tolerated, each named by a module in it, with its size: one may shrink or go
# (then shrink or drop its entry), none may grow, and no new one may appear. None is left, so any
# circle fails. The last one went with Tensor's op-backed methods: zgrad.tensor knows no op, and
# zgrad.tensor_math and zgrad.tensor_inplace, above the ops, bind those methods onto Tensor.
KNOWN_CIRCLES: dict[str, int] = {}


def runtime_import_graph() -> dict[str, set[str]]:
    """Module -> the zgrad modules it imports when it runs (see :func:`runtime_imports_of`)."""
    paths = {module_name(path): path for path in MODULES}
    return {name: runtime_imports_of(path, set(paths)) - {name} for name, path in paths.items()}


def test_no_new_import_circle():
    problems = []
    for circle in import_circles(runtime_import_graph()):
        known = [name for name in KNOWN_CIRCLES if name in circle]
        if not known:
            problems.append(f"a new import circle: {' <-> '.join(circle)}")
        elif len(circle) > KNOWN_CIRCLES[known[0]]:
            problems.append(f"the circle through {known[0]} grew to {len(circle)} modules: {circle}")
    assert not problems, "\n".join(problems)


def test_the_circle_check_finds_a_lazy_circle_and_skips_type_checking_imports(tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    from pkg.b import g\n")
    (tmp_path / "b.py").write_text("from pkg.a import f\n")
    (tmp_path / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import f\n")
    modules = {"pkg.a", "pkg.b", "pkg.c"}
    graph = {f"pkg.{n}": runtime_imports_of(tmp_path / f"{n}.py", modules) for n in "abc"}
    assert graph == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": set()}
    assert import_circles(graph) == [["pkg.a", "pkg.b"]]


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


def test_grad_scaler_is_distributed_and_the_ops_reach_autocast_below_it():
    assert layer_of("zgrad.amp.grad_scaler") == "distributed" and layer_of("zgrad.amp") == "distributed"
    assert layer_of("zgrad.amp.autocast_mode") == "core" and layer_of("zgrad.ops.autocast") == "core"
    assert not any(i.startswith("zgrad.amp") for p in (PACKAGE / "ops").rglob("*.py") for i in imports_of(p))


def test_checker_catches_a_forbidden_edge(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import zmq\nfrom zgrad.tensor import Tensor\n")
    assert imports_of(bad) == ["zmq", "zgrad.tensor"]
    assert "core" not in ALLOWED["engine"] and "core" not in ALLOWED["transport"]
