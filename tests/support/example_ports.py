"""Running a pytorch/examples program ported to zgrad, on zgrad and on torch, comparably.

A port is a directory of ``tests/support/`` (``examples_<name>/``) holding the example's files with
``torch`` renamed to ``zgrad`` and little else changed. :func:`run_program` runs its program in this
process as ``python program.py ARGS`` would; given ``torch``, it undoes the rename in the program
and in the modules beside it that the program imports, so the run is the example's own program
(with the port's synthetic data and small sizes) on PyTorch.

Two runs of a seeded program still differ: zgrad's random streams are not PyTorch's. Inside
:func:`comparable` a library computes in float64 and takes every random draw a program makes
(``randn``, ``rand``, ``randint``, their ``_like`` forms, ``randperm``, the DataLoader's shuffling) from one
numpy generator seeded the same for both runs; each module the program calls from outside any
module (its networks, also its losses) records its ``state_dict`` as the program initialized it
when first called, or, given another run's, loads that one (the ``state_dict`` copied across), and
its dropout is switched off (PyTorch draws the masks of attention's and of the RNNs' in C++, out of
reach); and every ``backward()`` records the loss it starts from, in full precision, so the two
traces compare step by step.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, Sequence

import numpy as np
import pytest

from paths import REPO, SUPPORT

__all__ = ["Trace", "comparable", "load_module", "run_program", "run_script"]

SCRIPT_TIMEOUT_S = 120
# what the ports import in place of packages zgrad has no counterpart of (torchvision) or that are not installed
# (matplotlib)
STANDINS = SUPPORT / "examples_standins"

_PORTED_NAME = re.compile(r"\bzgrad\b")


def _source(path: Path, lib: Any) -> str:
    """``path``'s text, with the port's rename undone when ``lib`` is not zgrad."""
    text = path.read_text()
    return text if lib.__name__ == "zgrad" else _PORTED_NAME.sub(lib.__name__, text)


class _PortModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the modules that sit beside a port's program (``model``, ``data``, ...) and the
    stand-ins from their source as :func:`_source` gives it for ``lib``."""

    def __init__(self, directory: Path, lib: Any) -> None:
        self.directories, self.lib = (directory, STANDINS), lib
        self.loaded: list[str] = []

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        parts = name.split(".")
        for directory in self.directories:
            package = directory.joinpath(*parts) / "__init__.py"
            if package.exists():
                return importlib.util.spec_from_file_location(name, package, loader=self,
                                                              submodule_search_locations=[str(package.parent)])
            if directory.joinpath(*parts).with_suffix(".py").exists():
                return importlib.util.spec_from_file_location(name, directory.joinpath(*parts).with_suffix(".py"),
                                                              loader=self)
        return None

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        self.loaded.append(module.__name__)
        path = Path(module.__file__)
        exec(compile(_source(path, self.lib), str(path), "exec"), module.__dict__)  # noqa: S102


@contextlib.contextmanager
def _importing(modules: _PortModules) -> Iterator[None]:
    """``modules`` first on the import path; what it loaded forgotten afterwards (ports share
    module names such as ``model``)."""
    sys.meta_path.insert(0, modules)
    try:
        yield
    finally:
        sys.meta_path.remove(modules)
        for name in modules.loaded:
            sys.modules.pop(name, None)


def load_module(path: Path, lib: Any) -> ModuleType:
    """The port's module at ``path`` (a file of a port's directory), loaded afresh on ``lib``
    (zgrad or torch), with the modules beside it importable."""
    modules = _PortModules(path.parent, lib)
    with _importing(modules):
        spec = modules.find_spec(path.stem, None)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def run_program(program: Path, args: Sequence[str], lib: Any) -> str:
    """Run the port's ``program`` to its end as ``__main__`` with ``args`` on ``lib`` (zgrad or
    torch), in the current directory; what it printed. Blocks; the modules it imported from beside
    it are forgotten afterwards.

    Raises:
        Exception: whatever the program raised, with a note holding what it printed.
    """
    argv, sys.argv = sys.argv, [str(program), *args]
    out = io.StringIO()
    try:
        with _importing(_PortModules(program.parent, lib)), contextlib.redirect_stdout(out):
            code = compile(_source(program, lib), str(program), "exec")
            exec(code, {"__name__": "__main__", "__file__": str(program)})  # noqa: S102
    except Exception as error:
        error.add_note(f"{program.name} printed:\n{out.getvalue()}")
        raise
    finally:
        sys.argv = argv
    return out.getvalue()


def run_script(program: Path, args: Sequence[str], cwd: Path) -> str:
    """Run the port's ``program`` as a user runs it (``python program.py ARGS`` in ``cwd``, one
    thread, the stand-ins on its path); its output. Blocks up to ``SCRIPT_TIMEOUT_S``.

    Raises:
        AssertionError: the program exited with an error (its output's end in the message).
    """
    path = os.pathsep.join([str(REPO), str(STANDINS), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(program), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=SCRIPT_TIMEOUT_S)
    assert done.returncode == 0, f"{program} exited with {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@dataclass
class Trace:
    """What a run inside :func:`comparable` recorded."""

    losses: list[float] = field(default_factory=list)  # each backward()'s scalar, in call order
    states: list[dict[str, np.ndarray]] = field(default_factory=list)  # each top-level module's, at its first call


def _shape(size: Sequence[Any], kwargs: dict[str, Any]) -> tuple[int, ...]:
    if "size" in kwargs:
        size = (kwargs["size"],)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(int(n) for n in size)


@contextlib.contextmanager
def comparable(lib: Any, states: list[dict[str, np.ndarray]] | None = None, seed: int = 0) -> Iterator[Trace]:
    """Within it, ``lib`` (zgrad or torch) computes in float64, draws as described in the module's
    docstring from ``numpy.random.default_rng(seed)``, and records a :class:`Trace`; with
    ``states`` (another run's ``Trace.states``), the n-th top-level module called loads the n-th."""
    rng = np.random.default_rng(seed)
    trace = Trace()
    given = iter(states) if states is not None else None
    started: list[Any] = []
    depth = 0

    def tensor(values: np.ndarray, dtype: Any = None) -> Any:
        return lib.tensor(values, dtype=dtype or lib.get_default_dtype())

    def randn(*size: Any, dtype: Any = None, **kwargs: Any) -> Any:
        return tensor(rng.standard_normal(_shape(size, kwargs)), dtype)

    def rand(*size: Any, dtype: Any = None, **kwargs: Any) -> Any:
        return tensor(rng.random(_shape(size, kwargs)), dtype)

    def randint(*bounds_and_size: Any, dtype: Any = None, **kwargs: Any) -> Any:
        *bounds, size = bounds_and_size if "size" not in kwargs else (*bounds_and_size, kwargs["size"])
        low, high = (0, *bounds) if len(bounds) == 1 else bounds
        return tensor(rng.integers(low, high, size=tuple(size)), dtype or lib.int64)

    def like(draw: Any, t: Any, dtype: Any) -> Any:
        return draw(*t.shape, dtype=dtype or t.dtype).to(t.device)

    def shuffled(sampler: Any) -> Iterator[int]:
        assert not sampler.replacement and sampler.num_samples == len(sampler.data_source), "only plain shuffles"
        return iter(rng.permutation(len(sampler.data_source)).tolist())

    module_call, backward = lib.nn.Module.__call__, lib.Tensor.backward

    def start(module: Any) -> None:
        started.append(module)
        for inner in module.modules():
            if "Dropout" in type(inner).__name__:
                inner.p = 0.0
            elif isinstance(getattr(inner, "dropout", None), float):  # attention's, and between RNN layers
                inner.dropout = 0.0
        if given is not None:
            module.load_state_dict({name: lib.tensor(value) for name, value in next(given).items()})
        trace.states.append({name: value.detach().numpy().copy() for name, value in module.state_dict().items()})

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal depth
        if depth == 0 and not any(self is module for module in started):
            start(self)
        depth += 1
        try:
            return module_call(self, *args, **kwargs)
        finally:
            depth -= 1

    def recording_backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        trace.losses.append(float(self.detach()))
        return backward(self, *args, **kwargs)

    default_dtype = lib.get_default_dtype()
    lib.set_default_dtype(lib.float64)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(lib, "randn", randn)
            patch.setattr(lib, "rand", rand)
            patch.setattr(lib, "randint", randint)
            patch.setattr(lib, "randperm", lambda n, **kwargs: lib.tensor(rng.permutation(n)))
            patch.setattr(lib, "randn_like", lambda t, dtype=None, **kw: like(randn, t, dtype))
            patch.setattr(lib, "rand_like", lambda t, dtype=None, **kw: like(rand, t, dtype))
            patch.setattr(lib.utils.data.RandomSampler, "__iter__", shuffled)
            patch.setattr(lib.nn.Module, "__call__", call)
            patch.setattr(lib.Tensor, "backward", recording_backward)
            yield trace
    finally:
        lib.set_default_dtype(default_dtype)
