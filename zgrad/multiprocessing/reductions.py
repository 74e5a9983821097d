"""How a tensor travels to another process through ``multiprocessing`` (a spawned child's
arguments, a queue, a pipe): by its shared memory, never by a copy, as in PyTorch.

``multiprocessing`` pickles what it sends between the processes of one job (Python's own
mechanism, which never reads the network or a file). :func:`init_reductions` tells its pickler
to send a CPU tensor as a descriptor of the shared memory it lies in, after moving it there
(``share_memory_``, as PyTorch does); the receiver maps the same pages. So a model whose
parameters were shared (``model.share_memory()``) and passed to ``spawn``-started workers is
trained by all of them at once (Hogwild), instead of each training a private copy.

A tensor that is part of a graph is refused (autograd does not cross processes), and so is one in
shared memory that has no descriptor (where memory files are missing), rather than sent as a copy
whose writes would be lost.
"""

from __future__ import annotations

from multiprocessing.reduction import DupFd, ForkingPickler
from typing import Any

import numpy as np

from zgrad.kernels.shared_host_memory import attach_shared, block_of
from zgrad.kernels.view_geometry import memory_owner
from zgrad.nn.module import Parameter
from zgrad.tensor import Tensor

__all__ = ["init_reductions", "rebuild_tensor", "reduce_tensor"]


def reduce_tensor(tensor: Tensor) -> tuple[Any, tuple[Any, ...]]:
    """What the pickler sends for ``tensor``: its shared memory's descriptor and layout.

    Raises:
        RuntimeError: ``tensor`` has a history that requires grad (PyTorch's message), lies on
            CUDA, or in shared memory without a descriptor.
    """
    if tensor.grad_fn is not None and tensor.requires_grad:
        raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does "
                           "not support crossing process boundaries.  If you just want to transfer the data, call "
                           "detach() on the tensor before serializing (e.g., putting it on the queue).")
    if not tensor.is_cpu:
        raise RuntimeError("zgrad sends only CPU tensors to another process: move it with .cpu() first")
    tensor.share_memory_()
    array = tensor._data
    owner = memory_owner(array)
    block = block_of(owner.base)
    if block is None or block.fd is None:
        raise RuntimeError("this tensor's shared memory has no file descriptor to send (memory files are missing "
                           "here): only children started with the 'fork' method can share it")
    offset = array.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    return rebuild_tensor, (DupFd(block.fd), len(block), offset, array.shape, array.strides, array.dtype,
                            tensor.requires_grad, isinstance(tensor, Parameter))


def rebuild_tensor(fd_source: Any, nbytes: int, offset: int, shape: tuple[int, ...], strides: tuple[int, ...],
                   dtype: np.dtype, requires_grad: bool, parameter: bool) -> Tensor:
    """The tensor :func:`reduce_tensor` sent: over the sender's memory, mapped here."""
    block = attach_shared(fd_source.detach(), nbytes)
    array = np.ndarray(shape, dtype, buffer=block, offset=offset, strides=strides)
    if parameter:
        return Parameter(array, requires_grad)
    return Tensor(array, requires_grad)


def init_reductions() -> None:
    """Have ``multiprocessing``'s pickler send tensors and parameters by their shared memory."""
    for cls in (Tensor, Parameter):
        ForkingPickler.register(cls, reduce_tensor)
