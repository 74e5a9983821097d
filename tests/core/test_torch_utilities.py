"""The everyday ``torch.<name>`` utilities of issue 32: type queries (``is_tensor``, ``numel``,
...), the function forms of methods (``clone``, ``fill``, ``rsub``, ...), ``as_tensor`` /
``asarray`` / ``scalar_tensor``, thread counts and print options; each against PyTorch where it
is installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import zgrad
from helpers import require_torch, torch


def _raised(call, lib) -> Exception | None:
    try:
        call(lib)
    except Exception as error:  # noqa: BLE001 - the error itself is compared
        return error
    return None


def assert_same_error(call) -> None:
    """zgrad raises what PyTorch raises (an exception of its type or a subclass, with its message;
    PyTorch's "torch." written "zgrad."), or nothing where PyTorch raises nothing."""
    ours, theirs = _raised(call, zgrad), _raised(call, torch)
    assert (ours is None) == (theirs is None), (ours, theirs)
    if theirs is not None:
        expected = str(theirs).replace("torch.float", "float").replace("torch.", "zgrad.")
        assert isinstance(ours, type(theirs)) and str(ours) == expected, (ours, theirs)


@pytest.fixture
def print_defaults():
    yield
    zgrad.set_printoptions(profile="default", sci_mode=None)
    if torch is not None:
        torch.set_printoptions(profile="default", sci_mode=None)


# --- type queries and function forms ------------------------------------------------------------

def test_type_queries():
    x, i = zgrad.ones(2, 3), zgrad.tensor([1])
    assert zgrad.is_tensor(x) and zgrad.is_tensor(zgrad.nn.Parameter(x)) and not zgrad.is_tensor(np.ones(2))
    assert zgrad.is_floating_point(x) and not zgrad.is_floating_point(i)
    assert zgrad.is_complex(x) is False and x.is_complex() is False
    assert zgrad.numel(x) == 6 and zgrad.is_nonzero(i) and not zgrad.is_nonzero(zgrad.tensor([0.0]))


ERRORS = {
    "is_floating_point-int": lambda lib: lib.is_floating_point(3),
    "numel-list": lambda lib: lib.numel([1, 2]),
    "is_nonzero-two": lambda lib: lib.is_nonzero(lib.tensor([1, 2])),
    "is_nonzero-empty": lambda lib: lib.is_nonzero(lib.tensor([])),
    "split_with_sizes-sum": lambda lib: lib.split_with_sizes(lib.arange(5), [1, 1]),
    "split_with_sizes-negative": lambda lib: lib.split_with_sizes(lib.arange(5), [6, -1]),
    "fill-1d-value": lambda lib: lib.fill(lib.ones(2), lib.ones(1)),
    "set_num_threads-0": lambda lib: lib.set_num_threads(0),
    "set_num_threads-float": lambda lib: lib.set_num_threads(2.0),
    "set_num_interop_threads-0": lambda lib: lib.set_num_interop_threads(0),
    "diff-order": lambda lib: lib.diff(lib.ones(3), n=-1),
    "diff-0d": lambda lib: lib.diff(lib.tensor(1.0)),
    "diff-prepend-dims": lambda lib: lib.diff(lib.ones(2, 3), prepend=lib.ones(3)),
    "cov-3d": lambda lib: lib.cov(lib.ones(2, 2, 2)),
    "cov-fweights-float": lambda lib: lib.cov(lib.ones(2, 3), fweights=lib.ones(3)),
    "cov-aweights-int": lambda lib: lib.cov(lib.ones(2, 3), aweights=lib.ones(3, dtype=lib.int64)),
    "cov-aweights-negative": lambda lib: lib.cov(lib.ones(2, 3), aweights=lib.tensor([1.0, -1.0, 1.0])),
    "cov-fweights-length": lambda lib: lib.cov(lib.ones(2, 3), fweights=lib.ones(2, dtype=lib.int64)),
    "trapezoid-x-length": lambda lib: lib.trapezoid(lib.ones(2, 3), lib.ones(2)),
    "trapezoid-bool": lambda lib: lib.trapezoid(lib.ones(3, dtype=lib.bool)),
    "trapezoid-0d": lambda lib: lib.trapezoid(lib.tensor(1.0)),
    "vander-2d": lambda lib: lib.vander(lib.ones(2, 2)),
    "vander-negative-N": lambda lib: lib.vander(lib.ones(2), N=-1),
    "unravel_index-float": lambda lib: lib.unravel_index(lib.tensor(1.0), (2, 3)),
    "put-int32-index": lambda lib: lib.ones(3).put(lib.tensor([0], dtype=lib.int32), lib.ones(1)),
    "put-counts": lambda lib: lib.ones(3).put(lib.tensor([0, 1]), lib.ones(1)),
    "put-range": lambda lib: lib.ones(3).put(lib.tensor([3]), lib.ones(1)),
    "put-negative-range": lambda lib: lib.ones(3).put(lib.tensor([-4]), lib.ones(1)),
    "put-dtype": lambda lib: lib.ones(3).put(lib.tensor([0]), lib.ones(1, dtype=lib.float64)),
    "index_reduce-sum": lambda lib: lib.ones(2, 3).index_reduce(0, lib.tensor([0]), lib.ones(1, 3), "sum"),
    "index_reduce-slices": lambda lib: lib.ones(2, 3).index_reduce(0, lib.tensor([0]), lib.ones(1, 2), "prod"),
    "index_reduce-count": lambda lib: lib.ones(2, 3).index_reduce(0, lib.tensor([0, 1]), lib.ones(1, 3), "prod"),
    "index_reduce-matrix-index": lambda lib: lib.ones(2, 3).index_reduce(0, lib.tensor([[0]]), lib.ones(1, 3),
                                                                           "prod"),
    "fill_diagonal_-1d": lambda lib: lib.ones(3).fill_diagonal_(0),
    "fill_diagonal_-unequal": lambda lib: lib.ones(2, 3, 2).fill_diagonal_(0),
    "dist-int": lambda lib: lib.dist(lib.ones(2, dtype=lib.int64), lib.ones(2, dtype=lib.int64)),
    "renorm-p": lambda lib: lib.renorm(lib.ones(2, 2), 0, 0, 1.0),
    "renorm-maxnorm": lambda lib: lib.renorm(lib.ones(2, 2), 2, 0, -1.0),
    "matrix_exp-int": lambda lib: lib.matrix_exp(lib.ones(2, 2, dtype=lib.int64)),
    "chain_matmul-none": lambda lib: lib.chain_matmul(),
    "chain_matmul-vector": lambda lib: lib.chain_matmul(lib.ones(2, 2), lib.ones(2)),
    "histogram-int": lambda lib: lib.histogram(lib.ones(3, dtype=lib.int64), 2),
    "hann_window-negative": lambda lib: lib.hann_window(-1),
    "kaiser_window-int": lambda lib: lib.kaiser_window(3, dtype=lib.int64),
    "bartlett_window-negative": lambda lib: lib.bartlett_window(-2, False),
    "sum_to_size": lambda lib: lib.ones(2, 3).sum_to_size(2),
    "type-name": lambda lib: lib.ones(2).type("nonsense.FloatTensor"),
}


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:torch.chain_matmul is deprecated")
@pytest.mark.parametrize("call", ERRORS.values(), ids=ERRORS.keys())
def test_errors_match_torch(call):
    require_torch()
    assert_same_error(call)


@pytest.mark.torch
def test_function_forms_match_torch():
    require_torch()
    data = np.arange(12, dtype=np.float32).reshape(3, 4) - 5

    def run(lib):
        x = lib.tensor(data, requires_grad=True)
        v = lib.tensor(2.5, requires_grad=True)
        outputs = [lib.clone(x) * 2, lib.fill(x, v) * x, lib.rsub(x, 3, alpha=2), lib.rsub(x, lib.ones(4)),
                   *lib.split_with_sizes(x, [1, 3], 1), *lib.unsafe_split(x, 2), *lib.unsafe_chunk(x, 2, 1),
                   *x.split_with_sizes([2, 1]), *x.unsafe_chunk(3)]
        sum(o.sum() * (k + 1) for k, o in enumerate(outputs)).backward()
        y = lib.detach(x)
        lib.zero_(y[0])
        lib.fill_(y[1], 7)
        return [o.detach().numpy() for o in outputs] + [x.grad.numpy(), v.grad.numpy(), y.numpy(),
                                                         lib.detach(x).requires_grad, lib.fill(x, 1).requires_grad]

    for ours, theirs in zip(run(zgrad), run(torch), strict=True):
        np.testing.assert_allclose(ours, theirs)


# --- as_tensor, asarray, scalar_tensor ----------------------------------------------------------

def test_as_tensor_shares_a_numpy_array_of_the_asked_dtype():
    array = np.zeros(3)
    shared, copied = zgrad.as_tensor(array), zgrad.as_tensor(array, dtype=zgrad.float32)
    array[0] = 5
    assert shared.dtype == zgrad.float64 and shared.tolist() == [5, 0, 0]
    assert copied.tolist() == [0, 0, 0]
    x = zgrad.ones(2)
    assert zgrad.as_tensor(x) is x and zgrad.as_tensor(x, dtype=zgrad.float64).dtype == zgrad.float64
    assert zgrad.as_tensor([1.0, 2.0]).dtype == zgrad.float32 and zgrad.as_tensor(2.0).dtype == zgrad.float32


@pytest.mark.torch
@pytest.mark.parametrize("make", [
    lambda lib, a: lib.asarray(a),
    lambda lib, a: lib.asarray(a, copy=True),
    lambda lib, a: lib.asarray(a, dtype=lib.float32),
    lambda lib, a: lib.asarray([1.0, 2.0]),
    lambda lib, a: lib.asarray(np.float64(2.0)),
    lambda lib, a: lib.asarray(3),
    lambda lib, a: lib.asarray([1.0, 2.0], requires_grad=True),
    lambda lib, a: lib.asarray(lib.ones(2, requires_grad=True), requires_grad=False),
    lambda lib, a: lib.asarray(a, dtype=lib.float32, copy=False),
    lambda lib, a: lib.asarray([1, 2], copy=False),
    lambda lib, a: lib.asarray(lib.ones(2), dtype=lib.int64, copy=False),
    lambda lib, a: lib.scalar_tensor(3),
    lambda lib, a: lib.scalar_tensor(3, dtype=lib.int64),
    lambda lib, a: lib.scalar_tensor(True),
], ids=["shared", "copy", "dtype", "list", "numpy-scalar", "int", "requires_grad", "detached", "alias-dtype",
        "alias-list", "alias-tensor", "scalar_tensor", "scalar_tensor-int64", "scalar_tensor-bool"])
def test_asarray_and_scalar_tensor_match_torch(make):
    require_torch()
    assert_same_error(lambda lib: make(lib, np.ones(3)))
    if _raised(lambda lib: make(lib, np.ones(3)), torch):
        return
    ours_source, theirs_source = np.arange(3.0), np.arange(3.0)
    ours, theirs = make(zgrad, ours_source), make(torch, theirs_source)
    ours_source[0] = theirs_source[0] = 9  # shows through where the memory is shared
    assert ours.tolist() == theirs.tolist()
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.") and ours.requires_grad == theirs.requires_grad


# --- threads --------------------------------------------------------------------------------------

def _run_python(code: str, env: dict) -> dict:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=300, env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_set_num_threads_changes_how_many_threads_kernels_use():
    """One thread runs big kernels serially (the parallel variant never compiles); two run them
    in parallel on two threads, also when set from another thread (PyTorch's setting is
    process-wide, Numba's per thread)."""
    report = _run_python("""
        import json, threading
        import numpy as np
        import numba
        import zgrad
        from zgrad.kernels import _jit
        from zgrad.kernels.cpu import kernels
        relu = kernels.elementwise.relu_forward
        x = np.linspace(-1, 1, 2 * _jit.PARALLEL_MIN_SIZE)
        out = np.empty_like(x)
        report = {"default": zgrad.get_num_threads()}
        zgrad.set_num_threads(1)
        relu(x, out)
        report.update(one=zgrad.get_num_threads(), one_tasks=relu.task_count(x.size),
                      one_parallel=len(relu.parallel.signatures))
        seen = []
        original = relu.parallel
        class Spy:
            signatures = property(lambda self: original.signatures)
            def __call__(self, *args):
                seen.append(numba.get_num_threads())
                return original(*args)
        relu.parallel = Spy()
        setter = threading.Thread(target=zgrad.set_num_threads, args=(2,))
        setter.start(); setter.join()
        relu(x, out)
        report.update(two=zgrad.get_num_threads(), two_tasks=relu.task_count(x.size), seen=list(seen),
                      correct=bool(np.array_equal(out, np.maximum(x, 0))))
        zgrad.set_num_threads(8)  # more than the pool: parallel calls use the pool's 2
        relu(x, out)
        report.update(eight=zgrad.get_num_threads(), eight_seen=seen[-1])
        print(json.dumps(report))
    """, {"NUMBA_NUM_THREADS": "2"})
    assert report == {"default": 2, "one": 1, "one_tasks": 1, "one_parallel": 0, "two": 2, "two_tasks": 2,
                      "seen": [2], "correct": True, "eight": 8, "eight_seen": 2}


def test_interop_threads_are_set_once():
    report = _run_python("""
        import json, os
        import zgrad
        report = {"default": zgrad.get_num_interop_threads() == os.cpu_count()}
        zgrad.set_num_interop_threads(3)
        report["set"] = zgrad.get_num_interop_threads()
        try:
            zgrad.set_num_interop_threads(4)
        except RuntimeError as error:
            report["again"] = str(error)
        print(json.dumps(report))
    """, {})
    assert report == {"default": True, "set": 3, "again": "Error: cannot set number of interop threads after "
                      "parallel work has started or set_num_interop_threads called"}


def test_reading_the_thread_count_starts_no_threads():
    report = _run_python("""
        import json
        from numba.np.ufunc import parallel
        import zgrad
        zgrad.set_num_threads(1)
        print(json.dumps({"threads": zgrad.get_num_threads(), "started": parallel._is_initialized}))
    """, {})
    assert report == {"threads": 1, "started": False}


# --- print options --------------------------------------------------------------------------------

REPR_CASES = {
    "floats": lambda lib: lib.tensor([[1.5, 2.25], [3.0, 4.0]]),
    "whole": lambda lib: lib.tensor([1.0, -2.0, 300.0]),
    "sci": lambda lib: lib.tensor([1e-5, 1.0, float("nan"), float("inf")]),
    "large": lambda lib: lib.tensor([1e9, 1.0]),
    "scalar64": lambda lib: lib.tensor(3.5, dtype=lib.float64),
    "int": lambda lib: lib.tensor([[1, -20], [300, 4]]),
    "int32": lambda lib: lib.tensor([1, 2], dtype=lib.int32),
    "bool": lambda lib: lib.tensor([True, False]),
    "empty": lambda lib: lib.zeros(0, 3),
    "empty-int": lambda lib: lib.tensor([], dtype=lib.int64),
    "summarized": lambda lib: lib.arange(2000.0).reshape(40, 50),
    "summarized-3d": lambda lib: lib.arange(3000).reshape(10, 10, 30),
    "long-rows": lambda lib: lib.arange(60.0).reshape(2, 30) / 7,
    "grad": lambda lib: lib.ones(2, requires_grad=True),
    "half": lambda lib: lib.tensor([0.1, 2.0], dtype=lib.float16),
    "bfloat16": lambda lib: lib.tensor([0.1, 2.0], dtype=lib.bfloat16),
    "specials": lambda lib: lib.tensor([float("inf"), -0.0, 2.5, float("-inf")]),
    "int-3d": lambda lib: lib.arange(24).reshape(2, 3, 4),
}
OPTIONS = {
    "default": {},
    "precision": {"precision": 2},
    "narrow": {"linewidth": 30},
    "threshold": {"threshold": 5, "edgeitems": 1},
    "short": {"profile": "short"},
    "full": {"profile": "full"},
    "sci": {"sci_mode": True},
    "fixed": {"sci_mode": False, "precision": 6},
    "no-edges": {"threshold": 3, "edgeitems": 0},
    "sci-short": {"threshold": 3, "edgeitems": 1, "sci_mode": True, "precision": 1},
}


def _comparable(text: str) -> str:
    return text.replace("torch.", "")


@pytest.mark.torch
@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
@pytest.mark.parametrize("make", REPR_CASES.values(), ids=REPR_CASES.keys())
def test_repr_matches_torch_under_print_options(make, options, print_defaults):
    require_torch()
    if options.get("linewidth") == 30 and "dtype=" in repr(make(zgrad)):
        pytest.skip("zgrad names a dtype 'float64' where torch writes 'torch.float64': the suffix wraps elsewhere")
    zgrad.set_printoptions(**options)
    torch.set_printoptions(**options)
    assert repr(make(zgrad)) == _comparable(repr(make(torch)))


def test_set_printoptions_keeps_what_it_is_not_given(print_defaults):
    zgrad.set_printoptions(precision=2)
    zgrad.set_printoptions(linewidth=120)
    assert repr(zgrad.tensor([1.0 / 3])) == "tensor([0.33])"
    zgrad.set_printoptions(profile="default")
    assert repr(zgrad.tensor([1.0 / 3])) == "tensor([0.3333])"


# --- the rest of issue 32's functions: what the conformance table cannot express ------------------

@pytest.mark.torch
def test_histogram_with_edges_and_weights_matches_torch():
    require_torch()
    data, edges = np.array([0.5, 1.0, 1.5, 3.0, 9.0, -1.0]), np.array([0.0, 1.0, 2.5, 3.0])
    weights = np.arange(6.0)
    for density in (False, True):
        ours = zgrad.histogram(zgrad.tensor(data), zgrad.tensor(edges), weight=zgrad.tensor(weights), density=density)
        theirs = torch.histogram(torch.tensor(data), torch.tensor(edges), weight=torch.tensor(weights),
                                 density=density)
        np.testing.assert_allclose(ours.hist.numpy(), theirs.hist.numpy())
        np.testing.assert_allclose(ours.bin_edges.numpy(), theirs.bin_edges.numpy())


@pytest.mark.parametrize("call", [
    lambda lib: lib.trapezoid(lib.ones(3), lib.ones(3), dx=2),
    lambda lib: lib.cumulative_trapezoid(lib.ones(3), 2.0),
], ids=["x-and-dx", "number-x"])
def test_trapezoid_takes_sample_points_or_a_spacing(call):
    with pytest.raises(TypeError, match="received an invalid combination of arguments"):  # PyTorch's TypeError
        call(zgrad)


def test_chain_matmul_warns_that_it_is_deprecated():
    a = zgrad.tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.warns(UserWarning, match="torch.chain_matmul is deprecated"):
        assert zgrad.chain_matmul(a, a).tolist() == [[7.0, 10.0], [15.0, 22.0]]


def test_windows_take_device_and_requires_grad():
    window = zgrad.blackman_window(4, requires_grad=True)
    assert window.requires_grad and window.is_leaf and window.dtype == zgrad.float32
    assert zgrad.hann_window(0).shape == (0,) and zgrad.kaiser_window(1).tolist() == [1.0]


@pytest.mark.torch
def test_in_place_comparisons_of_a_graph_tensor_cut_its_gradient():
    require_torch()
    for lib in (zgrad, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 1
        y.gt_(1.5)
        assert y.tolist() == [0.0, 1.0, 1.0]
        with pytest.raises(RuntimeError):
            x.eq_(2)  # a leaf that requires grad, as every in-place op
