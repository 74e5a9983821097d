"""``zgrad.functional``: the tensor functions PyTorch keeps in ``torch.functional`` (each is the
same object as its ``zgrad.<name>``), for programs that import them from there. PyTorch's ``stft``,
``istft``, ``lu``, ``pca_lowrank`` and ``svd_lowrank`` are not among them: zgrad has none of them."""

from zgrad.linalg.matrix_functions import chain_matmul
from zgrad.linalg.norms import legacy_norm as norm
from zgrad.ops import (
    atleast_1d, atleast_2d, atleast_3d, block_diag, broadcast_shapes, broadcast_tensors, cartesian_prod, cdist, einsum,
    meshgrid, split, tensordot, unique, unique_consecutive, unravel_index,
)

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "block_diag", "broadcast_shapes", "broadcast_tensors",
           "cartesian_prod", "cdist", "chain_matmul", "einsum", "meshgrid", "norm", "split", "tensordot", "unique",
           "unique_consecutive", "unravel_index"]
