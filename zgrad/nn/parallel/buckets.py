"""DDP's gradient buckets: which parameters share one flat buffer, and the bucket a comm hook sees.

Assignment follows PyTorch's ``compute_bucket_assignment_by_size``: parameters are taken in the
order given, grouped by dtype, and a bucket is closed as soon as it holds at least the current
size limit; the limits advance through ``bucket_size_limits`` (a small first bucket, then
``bucket_cap_mb``). At construction the order is the module's, and the bucket list is then
reversed (gradients are computed roughly in reverse order, so bucket 0 is ready first); once
rebuilt, the order is the one in which gradients became ready in the first iteration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from zgrad.kernels import dispatch
from zgrad.tensor import Tensor

__all__ = ["assign_buckets", "Bucket", "GradBucket", "FIRST_BUCKET_BYTES"]

FIRST_BUCKET_BYTES = 1 << 20  # PyTorch's dist._DEFAULT_FIRST_BUCKET_BYTES


def assign_buckets(params: Sequence[Tensor], order: Sequence[int], size_limits: Sequence[int]) -> list[list[int]]:
    """Parameter indices per bucket, taking ``params[i]`` for ``i`` in ``order``.

    Args:
        params: every parameter, by index.
        order: the indices in the order to fill buckets in.
        size_limits: bytes from which a bucket is closed: the first for a dtype's first bucket,
            the next for its second, the last for all later ones.
    """
    open_buckets: dict[np.dtype, tuple[list[int], int, int]] = {}  # dtype -> (indices, bytes, limit position)
    result: list[list[int]] = []
    for index in order:
        data = params[index]._data
        indices, size, position = open_buckets.get(data.dtype, ([], 0, 0))
        indices.append(index)
        size += data.nbytes
        if size >= size_limits[position]:
            result.append(indices)
            indices, size, position = [], 0, min(position + 1, len(size_limits) - 1)
        open_buckets[data.dtype] = (indices, size, position)
    result.extend(indices for indices, _, _ in open_buckets.values() if indices)
    return result


class Bucket:
    """One flat buffer holding the gradients of some parameters (all of one dtype).

    Attributes:
        index: position in the reducer's list (buckets are reduced in index order on every rank).
        params: the parameters' indices, in buffer order.
        buffer: the flat gradient buffer.
        views: one view of ``buffer`` per parameter, shaped like it.
        handed_out: the views were given to the parameters as their averaged gradients (no copy
            back); :meth:`reset` then takes new memory.
        pending: parameters of this iteration whose gradient has not been marked ready yet.
        future: the reduction in flight (a Future of the reduced buffer), once launched.
    """

    def __init__(self, index: int, param_indices: list[int], params: Sequence[Tensor]) -> None:
        self.index = index
        self.params = param_indices
        self._shapes = [params[i]._data.shape for i in param_indices]
        first = params[param_indices[0]]._data
        self._dtype, self._device_type = first.dtype, dispatch.device_type_of(first)
        size = sum(params[i]._data.size for i in param_indices)
        self._allocate(dispatch.full((size,), 0, self._dtype, self._device_type))  # on the parameters' device
        self.pending = len(param_indices)
        self.future: Any = None

    def _allocate(self, buffer: Any) -> None:
        self.buffer = buffer
        self.views: list[Any] = []
        offset = 0
        for shape in self._shapes:
            size = int(np.prod(shape))
            self.views.append(buffer[offset:offset + size].reshape(shape))
            offset += size
        self.handed_out = False  # the views became gradients: the next iteration needs new memory

    def reset(self) -> None:
        """Before an iteration: every parameter pending; new memory if the last was handed out."""
        if self.handed_out:
            # every slot is written before it is read
            self._allocate(dispatch.empty(self.buffer.shape, self._dtype, self._device_type))
        self.pending = len(self.params)
        self.future = None


class GradBucket:
    """What a communication hook gets (``torch.distributed.GradBucket``): the flat buffer of one
    bucket of averaged-to-be gradients and where they come from. The hook must return a
    :class:`~zgrad.futures.Future` whose value is the reduced flat tensor."""

    def __init__(self, bucket: Bucket, params: Sequence[Tensor], last_index: int) -> None:
        self._bucket = bucket
        self._params = params
        self._last_index = last_index

    def index(self) -> int:
        """The bucket's index: hooks run in index order, on every rank."""
        return self._bucket.index

    def buffer(self) -> Tensor:
        """The flat buffer (a tensor sharing its memory)."""
        return Tensor(self._bucket.buffer)

    def set_buffer(self, buffer: Tensor) -> None:
        """Copy ``buffer`` into the bucket's flat buffer."""
        dispatch.copy_into(self._bucket.buffer, buffer._data.reshape(-1))

    def gradients(self) -> list[Tensor]:
        """One tensor per parameter, viewing its part of the buffer."""
        return [Tensor(v) for v in self._bucket.views]

    def parameters(self) -> list[Tensor]:
        """The bucket's parameters, in buffer order."""
        return [self._params[i] for i in self._bucket.params]

    def is_last(self) -> bool:
        """Whether this is the last bucket of the iteration."""
        return self._bucket.index == self._last_index

    def __repr__(self) -> str:
        return f"<GradBucket {self._bucket.index}: {len(self._bucket.params)} parameters, {self._bucket.buffer.size} elements>"
