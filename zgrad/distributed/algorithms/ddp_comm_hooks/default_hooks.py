"""The built-in DDP communication hooks (``torch.distributed.algorithms.ddp_comm_hooks.default_hooks``).

A hook is called as ``hook(state, bucket)`` for each gradient bucket, in bucket index order, and
returns a :class:`~zgrad.futures.Future` of the reduced flat tensor. ``state`` is the process
group to reduce over (None: the world), as in PyTorch. Register one with
``ddp.register_comm_hook(state, hook)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.distributed.collectives.api import all_reduce, group
from zgrad.futures import Future
from zgrad.kernels.promotion import BFLOAT16
from zgrad.nn.parallel.buckets import GradBucket
from zgrad.tensor import Tensor

__all__ = ["allreduce_hook", "bf16_compress_hook", "fp16_compress_hook"]


def _allreduce_fut(process_group: Any, tensor: Tensor) -> Future:
    """Average ``tensor`` over the group, in place: divided by the size, then summed."""
    group_to_use = process_group if process_group is not None else group.WORLD
    tensor.div_(group_to_use.size())
    return all_reduce(tensor, group=group_to_use, async_op=True).get_future().then(lambda fut: fut.value()[0])


def allreduce_hook(process_group: Any, bucket: GradBucket) -> Future:
    """What DDP does without a hook: the bucket divided by the group size and all-reduced.

    Example::

        ddp.register_comm_hook(None, allreduce_hook)
    """
    return _allreduce_fut(process_group, bucket.buffer())


def _compress_hook(dtype: np.dtype, process_group: Any, bucket: GradBucket) -> Future:
    """The bucket sent as ``dtype``: cast, divided by the group size, all-reduced, then cast back
    into the bucket's buffer."""
    group_to_use = process_group if process_group is not None else group.WORLD
    world_size = group_to_use.size()
    buffer = bucket.buffer()
    compressed = buffer.to(dtype).div_(world_size)

    def decompress(fut: Future) -> Tensor:
        buffer.copy_(fut.value()[0])
        return buffer

    return all_reduce(compressed, group=group_to_use, async_op=True).get_future().then(decompress)


def fp16_compress_hook(process_group: Any, bucket: GradBucket) -> Future:
    """Send the bucket as float16 (half the bytes): cast, divide by the group size, all-reduce,
    then cast the result back into the bucket's buffer.

    Example::

        ddp.register_comm_hook(None, fp16_compress_hook)
    """
    return _compress_hook(np.dtype(np.float16), process_group, bucket)


def bf16_compress_hook(process_group: Any, bucket: GradBucket) -> Future:
    """Send the bucket as bfloat16 (half the bytes, float32's range, 8 bits of precision): cast,
    divide by the group size, all-reduce, then cast the result back into the bucket's buffer.

    Example::

        ddp.register_comm_hook(None, bf16_compress_hook)
    """
    return _compress_hook(BFLOAT16, process_group, bucket)
