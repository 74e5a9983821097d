"""Conformance rows of indexing, sorting and counting: gather, scatter, index_select, masked_fill,
where, ``x[key]``, take, take_along_dim, masked_select, masked_scatter, nonzero, argwhere,
index_add, index_copy, index_fill, index_put, scatter_add, scatter_reduce, index_reduce, put,
fill_diagonal_, sort, argsort, msort, topk, kthvalue, unique, unique_consecutive, bincount, histc,
histogram, searchsorted, bucketize.

Where a written position may repeat and PyTorch leaves which write wins unspecified (scatter,
index_copy, index_put without accumulate), the index has one entry per written slice so no
position repeats. Sorts and selections by rank use distinct values, so positions agree.
"""

from __future__ import annotations

from row import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, Lit, Row, Scalar, T

__all__ = ["ROWS"]


def _index(shape: tuple[int, ...], high: int) -> T:
    """An int64 index tensor of ``shape`` with values in [0, high)."""
    return T(shape=shape, dtype="int64", domain="index", high=high)


def _mask(shape: tuple[int, ...]) -> T:
    return T(shape=shape, dtype="bool", domain="mask")


_SCATTER_INDEX = _index((2, 4), 3)  # into dim 0 of a (3, 4) tensor; positions repeat
_SRC = T(shape=(2, 4))

ROWS = [
    # --- the existing selection ops --------------------------------------------------------------
    Row("gather", (T(), Lit(1), _index((3, 2), 4))),
    Row("Tensor.gather", (T(), Lit(0), _index((2, 4), 3)), name="dim0"),
    Row("scatter", (T(), Lit(0), _index((1, 4), 3), T(shape=(1, 4)))),
    Row("scatter", (T(), Lit(1), _index((3, 1), 4)), kwargs={"value": Scalar(2)}, name="value"),
    Row("Tensor.scatter_", (T(), Lit(0), _index((1, 4), 3), T(shape=(1, 4)))),
    Row("index_select", (T(), Lit(1), _index((5,), 4))),
    Row("Tensor.index_select", (T(), Lit(0), _index((2,), 3)), name="dim0"),
    Row("masked_fill", (T(), _mask((4,)), Scalar(3))),
    Row("Tensor.masked_fill_", (T(), _mask((3, 4)), Scalar(1))),
    Row("where", (_mask((3, 4)), T(), T(shape=(4,)))),
    Row("where", (_mask((3, 1)), T(), Scalar(2)), name="scalar"),
    Row("Tensor.__getitem__", (T(), Lit((slice(None), 1))), name="basic"),
    Row("Tensor.__getitem__", (T(), Lit((0, slice(1, 3)))), name="slice"),
    Row("Tensor.__getitem__", (T(), _index((2, 2), 3)), name="integer-array"),
    Row("Tensor.__getitem__", (T(), _mask((3, 4))), name="mask"),
    Row("Tensor.__getitem__", (T(), _mask((3,))), name="row-mask"),
    # --- selection -------------------------------------------------------------------------------
    Row("take", (T(), _index((2, 3), 12))),
    Row("Tensor.take", (T(), _index((5,), 12))),
    Row("take_along_dim", (T(), _index((3, 2), 4), Lit(1))),
    Row("take_along_dim", (T(), _index((1, 4), 3)), kwargs={"dim": Lit(0)}, name="broadcast"),
    Row("take_along_dim", (T(), _index((4,), 12)), name="flat"),
    Row("masked_select", (T(), _mask((4,)))),
    Row("Tensor.masked_select", (T(), _mask((3, 4)))),
    Row("masked_scatter", (T(), _mask((4,)), T(shape=(3, 4)))),
    Row("Tensor.masked_scatter_", (T(), _mask((3, 4)), T(shape=(12,)))),
    Row("nonzero", (T(),), grad=False),
    Row("nonzero", (T(),), kwargs={"as_tuple": Lit(True)}, grad=False, name="as_tuple"),
    Row("Tensor.nonzero", (T(shape=(2, 3, 2)),), grad=False),
    Row("argwhere", (T(),), grad=False),
    # --- writes by index -------------------------------------------------------------------------
    Row("index_add", (T(), Lit(1), _index((3,), 4), T(shape=(3, 3)))),
    Row("index_add", (T(), Lit(0), _index((4,), 3), T(shape=(4, 4))), kwargs={"alpha": Scalar(2)}, name="alpha"),
    Row("Tensor.index_add_", (T(), Lit(1), _index((3,), 4), T(shape=(3, 3)))),
    Row("index_copy", (T(), Lit(1), _index((1,), 4), T(shape=(3, 1)))),
    Row("Tensor.index_copy_", (T(), Lit(0), _index((1,), 3), T(shape=(1, 4)))),
    Row("index_fill", (T(), Lit(1), _index((2,), 4), Scalar(5))),
    Row("Tensor.index_fill_", (T(), Lit(0), _index((2,), 3), Scalar(1))),
    Row("index_put", (T(), (_index((3,), 3), _index((3,), 4)), T(shape=(3,))), kwargs={"accumulate": Lit(True)}),
    Row("Tensor.index_put_", (T(), (_index((1,), 3),), T(shape=(1, 4))), name="assign"),
    Row("Tensor.index_put_", (T(), (_index((5,), 3),), T(shape=(4,))), kwargs={"accumulate": Lit(True)},
        name="accumulate"),
    Row("scatter_add", (T(), Lit(0), _SCATTER_INDEX, _SRC)),
    Row("Tensor.scatter_add_", (T(), Lit(1), _index((3, 6), 4), T(shape=(3, 6)))),
    *(Row("scatter_reduce", (T(), Lit(0), _SCATTER_INDEX, _SRC, Lit(reduce)), kwargs={"include_self": Lit(include)},
          name=f"{reduce}{'' if include else '-exclude-self'}")
      for reduce in ("sum", "prod", "mean", "amax", "amin") for include in (True, False)),
    Row("Tensor.scatter_reduce_", (T(), Lit(1), _index((3, 2), 4), T(shape=(3, 2)), Lit("amax"))),
    *(Row("index_reduce", (T(), Lit(0), _index((5,), 3), T(shape=(5, 4)), Lit(reduce)),
          kwargs={"include_self": Lit(include)}, name=f"{reduce}{'' if include else '-exclude-self'}")
      for reduce in ("prod", "mean", "amax", "amin") for include in (True, False)),
    Row("Tensor.index_reduce_", (T(), Lit(1), _index((2,), 4), T(shape=(3, 2)), Lit("amin"))),
    Row("Tensor.put", (T(), T(shape=(2, 2), dtype="int64", domain="index", high=12), T(shape=(2, 2))),
        kwargs={"accumulate": Lit(True)}, name="accumulate"),
    Row("Tensor.put", (T(), T(shape=(1,), dtype="int64", domain="index", high=12), T(shape=(1,))), name="one"),
    Row("Tensor.put_", (T(), T(shape=(5,), dtype="int64", domain="index", high=12), T(shape=(5,))),
        kwargs={"accumulate": Lit(True)}),
    Row("Tensor.fill_diagonal_", (T(shape=(5, 3)), Scalar(2)), kwargs={"wrap": Lit(True)}),
    Row("Tensor.fill_diagonal_", (T(shape=(3, 3, 3)), Scalar(1)), name="cube"),
    # --- sorting and searching -------------------------------------------------------------------
    Row("sort", (T(),), domain="distinct"),
    Row("sort", (T(), Lit(0)), kwargs={"descending": Lit(True)}, domain="distinct", name="descending"),
    Row("sort", (T(),), kwargs={"stable": Lit(True)}, name="stable"),
    Row("Tensor.sort", (T(shape=(2, 3, 4)),), kwargs={"dim": Lit(1)}, domain="distinct"),
    Row("argsort", (T(),), kwargs={"dim": Lit(0), "descending": Lit(True)}, domain="distinct", grad=False),
    Row("argsort", (T(),), kwargs={"stable": Lit(True)}, grad=False, name="stable"),
    Row("msort", (T(),), domain="distinct"),
    Row("topk", (T(), Lit(2)), domain="distinct"),
    Row("Tensor.topk", (T(), Lit(2)), kwargs={"dim": Lit(0), "largest": Lit(False)}, domain="distinct"),
    Row("kthvalue", (T(), Lit(2)), domain="distinct"),
    Row("Tensor.kthvalue", (T(), Lit(3), Lit(0)), kwargs={"keepdim": Lit(True)}, domain="distinct"),
    Row("searchsorted", (T(shape=(6,)), T()), grad=False),
    Row("searchsorted", (T(), T(shape=(3, 2))), kwargs={"right": Lit(True)}, grad=False, name="rows-right"),
    Row("searchsorted", (T(shape=(6,)), T()), kwargs={"side": Lit("right"), "out_int32": Lit(True)}, grad=False,
        name="side"),
    Row("bucketize", (T(), T(shape=(5,))), grad=False),
    Row("bucketize", (T(), T(shape=(5,))), kwargs={"right": Lit(True)}, grad=False, name="right"),
    # --- counting --------------------------------------------------------------------------------
    Row("unique", (T(),), grad=False),
    Row("unique", (T(),), kwargs={"return_inverse": Lit(True), "return_counts": Lit(True)}, grad=False,
        name="inverse-counts"),
    Row("Tensor.unique", (T(shape=(12,), domain="index", high=4),), kwargs={"return_counts": Lit(True)}, grad=False),
    Row("unique", (T(shape=(6, 2), domain="index", high=2),),
        kwargs={"dim": Lit(0), "return_inverse": Lit(True), "return_counts": Lit(True)}, grad=False, name="dim"),
    Row("unique_consecutive", (T(shape=(2, 8), domain="index", high=2),), kwargs={"dim": Lit(1)}, grad=False,
        name="dim"),
    Row("unique_consecutive", (T(shape=(12,), domain="index", high=3),),
        kwargs={"return_inverse": Lit(True), "return_counts": Lit(True)}, grad=False),
    Row("bincount", (T(shape=(8,), domain="index", high=5),), dtypes=(*INT_DTYPES, "bool", "float32"), grad=False),
    Row("bincount", (_index((8,), 5), T(shape=(8,))), kwargs={"minlength": Lit(7)}, grad=False, name="weights"),
    Row("histc", (T(shape=(20,)), Lit(5), Lit(-1.0), Lit(1.0)), dtypes=ALL_DTYPES, grad=False),
    Row("Tensor.histc", (T(shape=(20,)),), kwargs={"bins": Lit(4)}, dtypes=FLOAT_DTYPES, grad=False),
    Row("histogram", (T(shape=(20,)), Lit(5)), dtypes=ALL_DTYPES, grad=False),
    Row("Tensor.histogram", (T(shape=(20,)),), kwargs={"bins": Lit(4), "range": Lit((-1.0, 1.0)),
                                                      "density": Lit(True)}, dtypes=("float32", "float64"), grad=False),
    Row("histogram", (T(shape=(20,)), Lit(3)), kwargs={"weight": T(shape=(20,), domain="positive")},
        dtypes=("float32", "float64"), grad=False, name="weight"),
]
