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

import weakref
from multiprocessing.context import get_spawning_popen
from multiprocessing.reduction import DupFd, ForkingPickler
from typing import Any

import numpy as np

from zgrad.engine.versions import leaf_owning
from zgrad.kernels.shared_host_memory import attach_shared, block_of
from zgrad.kernels.view_geometry import memory_owner
from zgrad.nn.module import Parameter
from zgrad.tensor import Tensor

__all__ = ["init_reductions", "rebuild_tensor", "reduce_tensor"]


def reduce_tensor(tensor: Tensor) -> tuple[Any, tuple[Any, ...]]:
    """What the pickler sends for ``tensor``: its shared memory's descriptor and layout.

    A tensor not yet in shared memory is moved there first when it owns its memory; an alias of
    a parameter (``p.detach()``, ``p.data``) moves the parameter with it.

    Raises:
        RuntimeError: ``tensor`` has a history that requires grad (PyTorch's message), lies on
            CUDA, is a view of memory that is not shared (moving only the view would leave the
            other tensors behind), or lies in shared memory without a descriptor.
    """
    if tensor.grad_fn is not None and tensor.requires_grad:
        raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does "
                           "not support crossing process boundaries.  If you just want to transfer the data, call "
                           "detach() on the tensor before serializing (e.g., putting it on the queue).")
    if not tensor.is_cpu:
        raise RuntimeError("zgrad sends only CPU tensors to another process: move it with .cpu() first")
    if not tensor.is_shared():
        _move_to_shared_memory(tensor)
    array = tensor._data
    owner = memory_owner(array)
    block = block_of(owner.base)
    if block is None or block.fd is None:
        raise RuntimeError("this tensor's shared memory has no file descriptor to send (memory files are missing "
                           "here, or the open-files limit was reached): only children started with the 'fork' "
                           "method can share it")
    offset = array.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    return rebuild_tensor, (_descriptor(block), len(block), offset, array.shape, array.strides, array.dtype,
                            tensor.requires_grad, isinstance(tensor, Parameter))


def _move_to_shared_memory(tensor: Tensor) -> None:
    array = tensor._data
    if array.base is not None:
        raise RuntimeError("this tensor views memory other tensors hold, which is not in shared memory: moving only "
                           "the view would leave them behind. Move the whole tensor first (base.share_memory_(), "
                           "or model.share_memory()), then send the view")
    leaf = leaf_owning(array)
    if leaf is not None and leaf is not tensor:  # an alias of a parameter: share the parameter itself
        leaf.share_memory_()
        tensor._rebind(leaf._data)
    else:
        tensor.share_memory_()


def _descriptor(block: Any) -> Any:
    """A handle that sends ``block``'s memory file to the receiving process: one per block and
    spawned child, so that two views of one block pass one descriptor (a child's list of inherited
    descriptors may not repeat one)."""
    popen = get_spawning_popen()
    if popen is None:  # a queue or a pipe: a handle per tensor, served to the reader
        return DupFd(block.fd)
    if block.handle is not None and block.handle[0]() is popen:
        return block.handle[1]
    handle = DupFd(block.fd)
    block.handle = (weakref.ref(popen), handle)
    return handle


def rebuild_tensor(fd_source: Any, nbytes: int, offset: int, shape: tuple[int, ...], strides: tuple[int, ...],
                   dtype: np.dtype, requires_grad: bool, parameter: bool) -> Tensor:
    """The tensor :func:`reduce_tensor` sent: over the sender's memory, mapped here once per handle."""
    block = getattr(fd_source, "_zgrad_block", None)
    if block is None:
        block = attach_shared(fd_source.detach(), nbytes)
        fd_source._zgrad_block = block  # the same handle, unpickled once, may serve several views
    whole = np.frombuffer(block, np.uint8)  # the block from its start: offsets are counted from there
    array = np.ndarray(shape, dtype, buffer=whole, offset=offset, strides=strides)
    if parameter:
        return Parameter(array, requires_grad)
    return Tensor(array, requires_grad)


def init_reductions() -> None:
    """Have ``multiprocessing``'s pickler send tensors and parameters by their shared memory."""
    for cls in (Tensor, Parameter):
        ForkingPickler.register(cls, reduce_tensor)
