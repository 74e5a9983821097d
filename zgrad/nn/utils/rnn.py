"""``zgrad.nn.utils.rnn``: batches of sequences of different lengths, as ``torch.nn.utils.rnn``:
``pad_sequence``, ``unpad_sequence``, ``PackedSequence``, ``pack_padded_sequence``,
``pad_packed_sequence``, ``pack_sequence``, ``unpack_sequence`` and ``invert_permutation``.

A packed sequence holds the time steps of a batch one after another, each step with only the
sequences still running (longest first): its ``data`` is (sum of lengths, *), ``batch_sizes[t]``
the number of sequences at step t. Packing and unpacking are one index selection each (indices
computed on the host from the lengths), so gradients flow through both.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from zgrad import ops
from zgrad.creation import arange, empty_like, full_like, tensor
from zgrad.kernels import dispatch
from zgrad.ops.padding import pad
from zgrad.tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pack_sequence", "pad_packed_sequence",
           "pad_sequence", "unpack_sequence", "unpad_sequence"]


class PackedSequence(NamedTuple):
    """The packed form of a batch of sequences; build it with :func:`pack_padded_sequence` or
    :func:`pack_sequence`, never directly.

    Fields: ``data`` (sum of lengths, *), ``batch_sizes`` (int64 on the CPU, one per time step),
    ``sorted_indices`` (the batch order, longest first, or None if already sorted) and
    ``unsorted_indices`` (its inverse).
    """

    data: Any
    batch_sizes: Any
    sorted_indices: Any = None
    unsorted_indices: Any = None

    def to(self, *args: Any, **kwargs: Any) -> "PackedSequence":
        """The same sequence with ``data`` (and the index tensors) moved or cast as ``Tensor.to``;
        ``batch_sizes`` stays on the CPU."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        device = data.device
        indices = (None if i is None else i.to(device) for i in (self.sorted_indices, self.unsorted_indices))
        return PackedSequence(data, self.batch_sizes, *indices)

    def cuda(self) -> "PackedSequence":
        return self.to("cuda")

    def cpu(self) -> "PackedSequence":
        return self.to("cpu")

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda


def _device_index(indices: np.ndarray, like: Any) -> Any:
    return dispatch.asarray(indices, np.int64, dispatch.device_type_of(like._data))


def pad_sequence(sequences: Sequence[Any], batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Any:
    """Stacks tensors of shape (L_i, *) into (max L, B, *) ((B, max L, *) with ``batch_first``),
    each padded with ``padding_value`` after its end (before its start with ``padding_side='left'``).

    Raises:
        ValueError: a ``padding_side`` other than 'left' or 'right'.
        RuntimeError: no sequences, or trailing shapes that differ.
    """
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        extra = longest - s.shape[0]
        amounts = [0, 0] * (s.ndim - 1) + ([0, extra] if padding_side == "right" else [extra, 0])
        padded.append(pad(s, amounts, value=padding_value) if extra else s)
    return ops.stack(padded, 0 if batch_first else 1)


def _lengths(lengths: Any) -> np.ndarray:
    array = np.asarray(lengths.tolist() if isinstance(lengths, Tensor) else lengths, dtype=np.int64).reshape(-1)
    if array.size and array.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that is "
                           "<= 0")
    return array


def pack_padded_sequence(input: Any, lengths: Any, batch_first: bool = False,  # noqa: A002
                         enforce_sorted: bool = True) -> PackedSequence:
    """Packs a padded batch (T, B, *) ((B, T, *) with ``batch_first``) of sequences of ``lengths``.

    ``enforce_sorted`` requires the lengths in decreasing order; otherwise the batch is sorted
    here and the order kept in ``sorted_indices`` / ``unsorted_indices``.

    Raises:
        RuntimeError: unsorted lengths with ``enforce_sorted``, a length <= 0, or a length
            longer than the input.
        ValueError: as many lengths as sequences, not.
    """
    lengths = _lengths(lengths)
    x = ops.transpose(input, 0, 1) if batch_first else input
    if lengths.size != x.shape[1]:
        raise ValueError(f"Expected `len(lengths)` to be equal to batch_size, but got {lengths.size} (batch_size="
                         f"{x.shape[1]})")
    sorted_indices = unsorted_indices = None
    if enforce_sorted:
        if np.any(np.diff(lengths) > 0):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You "
                               "can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                               "sidestep this requirement if you do not need ONNX exportability.")
    else:
        order = np.argsort(-lengths, kind="stable")
        lengths = lengths[order]
        sorted_indices = tensor(order, dtype=np.int64, device=x.device)
        unsorted_indices = tensor(np.argsort(order), dtype=np.int64, device=x.device)
        x = ops.index_select(x, 1, sorted_indices)
    steps, batch = x.shape[0], x.shape[1]
    if lengths.size and lengths[0] > steps:
        raise RuntimeError(f"Expected the longest length {lengths[0]} to be at most the input's {steps} time steps")
    batch_sizes = (lengths[None, :] > np.arange(int(lengths.max(initial=0)))[:, None]).sum(1)
    rows = np.concatenate([t * batch + np.arange(n) for t, n in enumerate(batch_sizes)] or [np.zeros(0, np.int64)])
    flat = ops.reshape(x, (steps * batch, *x.shape[2:]))
    data = ops.index_select(flat, 0, Tensor(_device_index(rows, flat)))
    return PackedSequence(data, tensor(batch_sizes, dtype=np.int64), sorted_indices, unsorted_indices)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Any, Any]:
    """The inverse of :func:`pack_padded_sequence`: (padded (T, B, *) or (B, T, *), lengths (B,)
    int64), the batch in its original order, T the longest length or ``total_length``.

    Raises:
        ValueError: ``total_length`` shorter than the longest sequence.
    """
    data, batch_sizes = sequence.data, np.asarray(sequence.batch_sizes.tolist(), dtype=np.int64)
    steps = batch_sizes.size
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    batch = int(batch_sizes[0]) if batch_sizes.size else 0
    filler = data.shape[0]  # the index of the padding row appended to data
    rows = np.full((steps, batch), filler, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(batch_sizes)[:-1]]) if batch_sizes.size else batch_sizes
    for t, (start, n) in enumerate(zip(starts, batch_sizes)):
        rows[t, :n] = start + np.arange(n)
    fill = full_like(data[:1], padding_value)
    padded = ops.index_select(ops.cat([data, fill], 0), 0, Tensor(_device_index(rows.reshape(-1), data)))
    padded = ops.reshape(padded, (steps, batch, *data.shape[1:]))
    lengths = (batch_sizes[None, :] > np.arange(batch)[:, None]).sum(1)
    if sequence.unsorted_indices is not None:
        padded = ops.index_select(padded, 1, sequence.unsorted_indices)
        lengths = lengths[np.asarray(sequence.unsorted_indices.tolist(), dtype=np.int64)]
    return (ops.transpose(padded, 0, 1) if batch_first else padded), tensor(lengths, dtype=np.int64)


def pack_sequence(sequences: Sequence[Any], enforce_sorted: bool = True) -> PackedSequence:
    """Packs a list of (L_i, *) tensors: :func:`pad_sequence`, then :func:`pack_padded_sequence`."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Any]:
    """The list of (L_i, *) tensors that :func:`pack_sequence` packed, in their original order:
    :func:`pad_packed_sequence`, then :func:`unpad_sequence`."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def unpad_sequence(padded_sequences: Any, lengths: Any, batch_first: bool = False) -> list[Any]:
    """The inverse of :func:`pad_sequence`: the list of the first ``lengths[i]`` steps of each
    sequence of a padded (T, B, *) batch ((B, T, *) with ``batch_first``), each a new tensor
    (gradients flow back into ``padded_sequences``).

    Unlike PyTorch's, which transposes ``padded_sequences`` in place when ``batch_first`` is
    False, the input is left as it is.

    Raises:
        ValueError: ``lengths`` does not have one entry per sequence.
    """
    sequences = ops.transpose(padded_sequences, 0, 1) if not batch_first else padded_sequences
    counts = np.asarray(lengths.tolist() if isinstance(lengths, Tensor) else lengths, dtype=np.int64).reshape(-1)
    if counts.size != sequences.shape[0]:
        raise ValueError(f"unpad_sequence: expected one length per sequence ({sequences.shape[0]}), got "
                         f"{counts.size} lengths")
    return [sequences[i][:max(int(n), 0)].clone() for i, n in enumerate(counts)]


def invert_permutation(permutation: Any) -> Any:
    """The inverse of the 1-D index tensor ``permutation`` (``out[permutation[i]] = i``), such as
    a :class:`PackedSequence`'s ``unsorted_indices`` from its ``sorted_indices``; None for None."""
    if permutation is None:
        return None
    output = empty_like(permutation)
    output.scatter_(0, permutation, arange(0, permutation.numel(), device=permutation.device))
    return output
