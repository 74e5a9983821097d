"""Conformance rows of the linear algebra: the matrix-product family, contractions, norms and
``zgrad.linalg``'s solves and decompositions (see ``row.py`` for the vocabulary).

Products are tried over every dtype (PyTorch refuses bool, and float16 on some); factorizations
over the floating ones. Eigenvectors and singular vectors are defined up to sign, so their rows
compare dtype and shape only; ``eigh``/``cholesky`` read one triangle of a random (non-symmetric)
input, so their gradients are not checked against finite differences (``grad=False``).
"""

from __future__ import annotations

import math

from row import FLOAT_DTYPES, Lit, Row, T

SQUARE = (3, 3)

ROWS = [
    # --- products ---
    Row("mm", (T((2, 3)), T((3, 4)))),
    Row("Tensor.mm", (T((3, 3)), T((3, 2)))),
    Row("matmul", (T((2, 3, 4)), T((4, 2)))),
    Row("matmul", (T((4,)), T((2, 4, 3))), name="vector-batch"),
    Row("Tensor.matmul", (T((3,)), T((3,)))),
    Row("linalg.matmul", (T((2, 3)), T((3,)))),
    Row("bmm", (T((2, 3, 4)), T((2, 4, 5)))),
    Row("Tensor.bmm", (T((2, 3, 4)), T((2, 4, 1)))),
    Row("mv", (T((2, 3)), T((3,)))),
    Row("Tensor.mv", (T((2, 3)), T((3,)))),
    Row("dot", (T((4,)), T((4,)))),
    Row("Tensor.dot", (T((4,)), T((4,)))),
    Row("vdot", (T((4,)), T((4,)))),
    Row("inner", (T((2, 3)), T((4, 3)))),
    Row("Tensor.inner", (T((3,)), T((3,)))),
    Row("outer", (T((3,)), T((4,)))),
    Row("Tensor.outer", (T((3,)), T((2,)))),
    Row("ger", (T((3,)), T((4,)))),
    Row("addmm", (T((4,)), T((2, 3)), T((3, 4)))),
    Row("addmm", (T((2, 4)), T((2, 3)), T((3, 4))), {"beta": Lit(2), "alpha": Lit(3)}, name="scaled"),
    Row("Tensor.addmm", (T((2, 4)), T((2, 3)), T((3, 4)))),
    Row("Tensor.addmm_", (T((2, 4)), T((2, 3)), T((3, 4))), {"beta": Lit(2)}),
    Row("baddbmm", (T((2, 3, 4)), T((2, 3, 5)), T((2, 5, 4))), {"alpha": Lit(2)}),
    Row("Tensor.baddbmm_", (T((2, 3, 4)), T((2, 3, 5)), T((2, 5, 4)))),
    Row("addbmm", (T((3, 4)), T((2, 3, 5)), T((2, 5, 4)))),
    Row("Tensor.addbmm_", (T((3, 4)), T((2, 3, 5)), T((2, 5, 4))), {"beta": Lit(0)}),
    Row("addmv", (T((2,)), T((2, 3)), T((3,)))),
    Row("Tensor.addmv_", (T((2,)), T((2, 3)), T((3,))), {"alpha": Lit(2)}),
    Row("addr", (T((2, 3)), T((2,)), T((3,))), {"beta": Lit(2)}),
    Row("Tensor.addr_", (T((2, 3)), T((2,)), T((3,)))),
    Row("kron", (T((2, 3)), T((2, 2)))),
    Row("Tensor.kron", (T((3,)), T((2, 1, 2)))),
    Row("cross", (T((4, 3)), T((4, 3))), {"dim": Lit(1)}),
    Row("Tensor.cross", (T((3, 2)), T((3, 2))), {"dim": Lit(0)}),
    Row("linalg.cross", (T((1, 3)), T((4, 3)))),
    Row("linalg.vecdot", (T((3, 4)), T((3, 4)))),
    Row("tensordot", (T((2, 3, 4)), T((3, 4, 5)))),
    Row("tensordot", (T((2, 3, 4)), T((4, 5, 2))), {"dims": Lit(([0, 2], [2, 0]))}, name="lists"),
    Row("einsum", (Lit("ij,jk->ik"), T((2, 3)), T((3, 4)))),
    Row("einsum", (Lit("bhqd,bhkd->bhqk"), T((2, 3, 4, 5)), T((2, 3, 6, 5))), name="attention"),
    Row("einsum", (Lit("ii->i"), T(SQUARE)), name="diagonal"),
    Row("einsum", (Lit("...ij,...jk"), T((2, 3, 4)), T((4, 5))), name="ellipsis"),
    Row("einsum", (Lit("i,j"), T((3,)), T((4,))), name="outer"),
    Row("cdist", (T((2, 3, 4)), T((2, 5, 4)))),
    Row("cdist", (T((3, 4)), T((5, 4))), {"p": Lit(1.0)}, name="p1"),
    Row("cdist", (T((3, 4)), T((5, 4))), {"p": Lit(math.inf)}, name="inf"),
    # --- norms ---
    Row("linalg.vector_norm", (T((3, 4)),)),
    *(Row("linalg.vector_norm", (T((3, 4)), Lit(order)), name=f"ord{order}") for order in (1, 3, 0.5, math.inf, -math.inf, 0)),
    Row("linalg.vector_norm", (T((2, 3, 4)),), {"ord": Lit(3), "dim": Lit((0, 2)), "keepdim": Lit(True)}, name="dims"),
    *(Row("linalg.matrix_norm", (T((2, 4, 3)), Lit(order)), dtypes=FLOAT_DTYPES, name=f"ord{order}")
      for order in ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)),
    Row("linalg.norm", (T((2, 3, 4)),)),
    Row("linalg.norm", (T((3, 4)), Lit(2)), dtypes=FLOAT_DTYPES, name="matrix"),
    Row("linalg.norm", (T((2, 3, 4)), Lit(3)), {"dim": Lit(1)}, name="dim"),
    Row("norm", (T((2, 3, 4)),)),
    Row("norm", (T((2, 3, 4)), Lit(1), Lit(1), Lit(True)), name="p1"),
    Row("norm", (T((3, 4)), Lit("nuc")), dtypes=FLOAT_DTYPES, name="nuc"),
    Row("Tensor.norm", (T((2, 3)),), {"dim": Lit(-1)}),
    # --- solves and decompositions ---
    Row("linalg.inv", (T(SQUARE),), dtypes=FLOAT_DTYPES),
    Row("inverse", (T((2, 3, 3)),), dtypes=FLOAT_DTYPES),
    Row("linalg.det", (T((2, 3, 3)),), dtypes=FLOAT_DTYPES),
    Row("Tensor.det", (T(SQUARE),), dtypes=FLOAT_DTYPES),
    Row("linalg.slogdet", (T(SQUARE),), dtypes=FLOAT_DTYPES),
    Row("logdet", (T(SQUARE),), dtypes=FLOAT_DTYPES),
    Row("linalg.solve", (T(SQUARE), T((3, 2))), dtypes=FLOAT_DTYPES),
    Row("linalg.solve", (T((2, 3, 3)), T((2, 3))), dtypes=FLOAT_DTYPES, name="vector"),
    Row("linalg.solve", (T(SQUARE), T((2, 3))), {"left": Lit(False)}, dtypes=FLOAT_DTYPES, name="right"),
    Row("linalg.cholesky", (T(SQUARE),), dtypes=FLOAT_DTYPES, grad=False),
    Row("linalg.qr", (T((4, 3)),), dtypes=FLOAT_DTYPES),
    Row("linalg.qr", (T((3, 5)),), dtypes=FLOAT_DTYPES, name="wide"),
    Row("linalg.qr", (T((4, 3)), Lit("complete")), dtypes=FLOAT_DTYPES, grad=False, values=False, name="complete"),
    Row("linalg.svd", (T((4, 3)),), {"full_matrices": Lit(False)}, dtypes=FLOAT_DTYPES, values=False),
    Row("linalg.svdvals", (T((2, 4, 3)),), dtypes=FLOAT_DTYPES),
    Row("linalg.eigh", (T(SQUARE),), dtypes=FLOAT_DTYPES, grad=False, values=False),
    Row("linalg.eigvalsh", (T(SQUARE),), dtypes=FLOAT_DTYPES, grad=False),
    Row("linalg.pinv", (T((4, 3)),), dtypes=FLOAT_DTYPES),
    Row("linalg.pinv", (T((2, 3, 5)),), dtypes=FLOAT_DTYPES, name="wide"),
    Row("linalg.lstsq", (T((5, 3)), T((5, 2))), dtypes=FLOAT_DTYPES, grad=False),
    Row("linalg.solve_triangular", (T(SQUARE), T((3, 2))), {"upper": Lit(True)}, dtypes=FLOAT_DTYPES),
    Row("linalg.solve_triangular", (T(SQUARE), T((2, 3))), {"upper": Lit(False), "left": Lit(False),
                                                          "unitriangular": Lit(True)}, dtypes=FLOAT_DTYPES, name="unit"),
    Row("cholesky_solve", (T((3, 2)), T(SQUARE, domain="positive")), dtypes=FLOAT_DTYPES),
    Row("linalg.matrix_power", (T((2, 3, 3)), Lit(3))),
    Row("linalg.matrix_power", (T(SQUARE), Lit(-2)), dtypes=FLOAT_DTYPES, name="inverse"),
    Row("linalg.matrix_rank", (T((4, 3)),), dtypes=FLOAT_DTYPES, grad=False),
    Row("matrix_power", (T((2, 3, 3)), Lit(2))),
    Row("Tensor.matrix_power", (T(SQUARE), Lit(0)), name="zero"),
    Row("matrix_exp", (T((2, 3, 3)),), dtypes=("float32", "float64")),  # torch's half results are garbage
    Row("linalg.matrix_exp", (T((4, 4), domain="above1"),), dtypes=("float32", "float64"), name="large"),
    Row("Tensor.matrix_exp", (T(SQUARE),), dtypes=("float32", "float64")),
    Row("chain_matmul", (T((2, 3)), T((3, 4)), T((4, 2)))),
    Row("dist", (T(), T((4,)))),
    Row("dist", (T(), T()), {"p": Lit(1)}, name="p1"),
    Row("Tensor.dist", (T(), T()), {"p": Lit(math.inf)}, domain="distinct", name="inf"),
    Row("renorm", (T(), Lit(2), Lit(0), Lit(1.0)), dtypes=FLOAT_DTYPES),
    Row("Tensor.renorm", (T((2, 3, 4)), Lit(1), Lit(1), Lit(2.0)), dtypes=FLOAT_DTYPES),
    Row("Tensor.renorm_", (T(), Lit(3), Lit(-1), Lit(0.5)), dtypes=FLOAT_DTYPES),
]
