"""``zgrad.sparse``: PyTorch's ``torch.sparse`` functions over zgrad's sparse COO tensors
(:mod:`zgrad.sparse.coo`): ``mm``, ``addmm``, ``sum``, ``softmax`` and ``log_softmax``.

Sparse tensors are made with :func:`zgrad.sparse_coo_tensor` or :meth:`zgrad.Tensor.to_sparse`;
``zgrad.mm``, ``zgrad.add`` and the arithmetic operators take them too.
"""

from zgrad.sparse.operations import addmm, log_softmax, mm, softmax, sum

__all__ = ["addmm", "log_softmax", "mm", "softmax", "sum"]
