"""``default_collate`` and ``default_convert``: samples into batches, as PyTorch's.

``collate(batch, collate_fn_map=...)`` dispatches on the type of the batch's first element: a
function of ``collate_fn_map`` for leaves (tensors, numpy arrays and scalars, numbers, strings),
recursion for containers (mappings, namedtuples, sequences). In a DataLoader worker, tensors are
stacked straight into the shared memory the batch travels in (:mod:`.worker_info`); in the main
process with ``zgrad.stack``.
"""

from __future__ import annotations

import collections.abc
import copy
import re
from typing import Any, Callable, Sequence

import numpy as np

from zgrad.creation import from_numpy, tensor
from zgrad.kernels import dispatch
from zgrad.ops import stack
from zgrad.tensor import Tensor
from zgrad.utils.data._utils.worker_info import batch_allocator

__all__ = ["collate", "default_collate", "default_convert", "default_collate_fn_map", "collate_tensor_fn",
           "default_collate_err_msg_format"]

CollateFnMap = dict[type | tuple[type, ...], Callable[..., Any]]

# numpy dtypes default_collate cannot turn into tensors: bytes, str, void and object arrays.
np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def _is_numpy_value(data: Any) -> bool:
    """A numpy array or scalar, other than numpy's string scalars (PyTorch's test)."""
    kind = type(data)
    return kind.__module__ == "numpy" and kind.__name__ not in ("str_", "string_")


def default_convert(data: Any) -> Any:
    """Every numpy array (and numpy scalar) in ``data`` as a tensor sharing its memory, through
    mappings, namedtuples and sequences (tuples become lists); everything else unchanged. The
    DataLoader's ``collate_fn`` when batching is off (``batch_size=None``)."""
    if isinstance(data, Tensor):
        return data
    if _is_numpy_value(data):
        if isinstance(data, np.ndarray) and np_str_obj_array_pattern.search(data.dtype.str) is not None:
            return data
        return from_numpy(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def _rebuild_mapping(like: collections.abc.Mapping, values: dict) -> Any:
    """``values`` in a mapping of ``like``'s type: a copy of ``like`` updated, or the type built
    from the dict; a plain dict where neither works (PyTorch's fallbacks)."""
    try:
        if isinstance(like, collections.abc.MutableMapping):
            clone = copy.copy(like)
            clone.update(values)
            return clone
        return type(like)(values)  # type: ignore[call-arg]
    except TypeError:
        return values


def _rebuild_sequence(like: collections.abc.Sequence, items: list) -> Any:
    """``items`` in a sequence of ``like``'s type, or a list where that fails (PyTorch's fallbacks)."""
    try:
        if isinstance(like, collections.abc.MutableSequence):
            clone = copy.copy(like)
            for i, item in enumerate(items):
                clone[i] = item
            return clone
        return type(like)(items)  # type: ignore[call-arg]
    except TypeError:
        return items


def collate(batch: Sequence[Any], *, collate_fn_map: CollateFnMap | None = None) -> Any:
    """Collate ``batch`` (a list of samples) by the type of its first element.

    Args:
        batch: the samples.
        collate_fn_map: leaf type (or tuple of types) -> ``fn(batch, *, collate_fn_map)``; the
            exact type is looked up first, then each key in order with ``isinstance``.

    Returns:
        The batch: a leaf function's result, or the samples' container with each field collated.

    Raises:
        RuntimeError: sequences of different lengths.
        TypeError: an element no function and no container rule handles.
    """
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type in collate_fn_map:
            if isinstance(elem, collate_type):
                return collate_fn_map[collate_type](batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(elem, {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                                       for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(sample) != size for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)]
        return fields if isinstance(elem, tuple) else _rebuild_sequence(elem, fields)
    raise TypeError(default_collate_err_msg_format.format(elem_type))


def collate_tensor_fn(batch: Sequence[Any], *, collate_fn_map: CollateFnMap | None = None) -> Tensor:
    """Stack same-shaped tensors along a new first dimension, into one array allocated first: in
    a DataLoader worker, the shared memory the batch travels in. Tensors that require grad go
    through ``zgrad.stack``, which records the graph (as ``torch.stack`` does)."""
    if any(t._requires_grad for t in batch):
        return stack(batch, 0)
    arrays = [t._data for t in batch]
    allocate = batch_allocator() if dispatch.device_type_of(arrays[0]) == "cpu" else None
    return Tensor(dispatch.stack(arrays, 0, empty=allocate))


def _collate_numpy_array(batch: Sequence[Any], *, collate_fn_map: CollateFnMap | None = None) -> Any:
    if np_str_obj_array_pattern.search(batch[0].dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(batch[0].dtype))
    return collate([from_numpy(np.asarray(b)) for b in batch], collate_fn_map=collate_fn_map)


def _collate_numpy_scalar(batch: Sequence[Any], *, collate_fn_map: CollateFnMap | None = None) -> Tensor:
    return from_numpy(np.asarray(batch))


def _collate_float(batch: Sequence[Any], *, collate_fn_map: CollateFnMap | None = None) -> Tensor:
    return tensor(batch, dtype=np.float64)


def _collate_int(batch: Sequence[Any], *, collate_fn_map: CollateFnMap | None = None) -> Tensor:
    return tensor(batch)  # int64, or bool for bools


def _collate_str(batch: Sequence[Any], *, collate_fn_map: CollateFnMap | None = None) -> Sequence[Any]:
    return batch


default_collate_fn_map: CollateFnMap = {
    Tensor: collate_tensor_fn,
    np.ndarray: _collate_numpy_array,
    (np.bool_, np.number, np.object_): _collate_numpy_scalar,
    float: _collate_float,
    int: _collate_int,
    str: _collate_str,
    bytes: _collate_str,
}


def default_collate(batch: Sequence[Any]) -> Any:
    """Stack a list of samples into a batch, as PyTorch's ``default_collate``.

    Tensors and numpy arrays are stacked into a tensor with a new first dimension; Python floats
    give a float64 tensor, ints an int64 one (bools a bool one), numpy scalars keep their dtype;
    strings and bytes stay a list; mappings, namedtuples and sequences are collated field by field
    (tuples become lists). Extend it by adding to ``default_collate_fn_map``.

    Example::

        >>> default_collate([(zgrad.zeros(2), 0), (zgrad.ones(2), 1)])
        [tensor([[0., 0.], [1., 1.]]), tensor([0, 1])]

    Raises:
        TypeError: an element of another type (dataclasses and None included), or a numpy array
            of strings or objects.
        RuntimeError: samples whose sequences or tensors differ in size.
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)
