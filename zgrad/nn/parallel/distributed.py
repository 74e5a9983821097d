"""``DistributedDataParallel``: data-parallel training over a process group (``torch.nn.parallel``).

Construction checks that every rank has the same parameters (count and shapes), broadcasts rank
0's parameters and buffers, and builds the reducer (``reducer.py``): gradient buckets reduced
during backward, so that ``loss.backward()`` returns with every rank's ``.grad`` holding the
average over the ranks. Works the same inside a distributed autograd context, where
``dist_autograd.backward`` drives it and the averages land in the context.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any, Callable

import numpy as np

from zgrad.distributed.collectives import ops
from zgrad.distributed.collectives.env import debug_detail
from zgrad.distributed.collectives.process_group import ProcessGroup
from zgrad.distributed.collectives.state import current_world
from zgrad.engine.grad_mode import is_grad_enabled
from zgrad.device import usable_cuda_device
from zgrad.errors import ZgradError
from zgrad.futures import Future
from zgrad.kernels import dispatch
from zgrad.nn.module import Module
from zgrad.nn.parallel.buckets import FIRST_BUCKET_BYTES, GradBucket, assign_buckets
from zgrad.nn.parallel.join import Join, JoinConfig, check_global_requires_backward_grad_sync, notify_join_context
from zgrad.nn.parallel.reducer import Reducer
from zgrad.tensor import Tensor

__all__ = ["DistributedDataParallel"]

_MIB = 1 << 20


def _device_indices(module: Module, device_ids: Any, output_device: Any) -> tuple[list[int] | None, int | None]:
    """(device_ids, output_device) as device indices, PyTorch's rules: a module on one GPU may name
    that device (one element, an index or a device); a CPU module or one on several devices names
    none (both None then).

    Raises:
        ValueError: more than one device id; parameters on different device types; device ids or
            an output device for a CPU module or one on several devices.
        ZgradError: a device index past the last device.
    """
    if device_ids is not None and len(device_ids) > 1:
        raise ValueError("device_ids can only be None or contain a single element.")
    devices = {p.device for p in module.parameters()}
    types = {d.type for d in devices}
    if len(types) != 1:
        raise ValueError("DistributedDataParallel's input module must be on the same type of devices, but input "
                         f"module parameters locate in {types}.")
    if not device_ids or types == {"cpu"} or len(devices) > 1:
        if device_ids or output_device:
            raise ValueError(
                "DistributedDataParallel device_ids and output_device arguments only work with single-device/multiple-"
                f"device GPU modules or CPU modules, but got device_ids {device_ids}, output_device {output_device}, "
                f"and module parameters {devices}.")
        return None, None
    indices = [_cuda_index(d) for d in device_ids]
    return indices, _cuda_index(device_ids[0] if output_device is None else output_device)


def _cuda_index(device: Any) -> int:
    return usable_cuda_device(device).index or 0


def _moved_to(value: Any, device: str) -> Any:
    """``value`` with every tensor in it (through tuples, named tuples, lists and dicts, each kept of
    its class) on ``device``."""
    if isinstance(value, Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        items = [_moved_to(v, device) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_moved_to(v, device) for v in value]
    if isinstance(value, dict):
        moved = {k: _moved_to(v, device) for k, v in value.items()}
        if type(value) is dict:
            return moved
        same_kind = copy.copy(value)  # an OrderedDict, a defaultdict (its factory kept): the same class
        same_kind.update(moved)
        return same_kind
    return value


class DistributedDataParallel(Module):
    """Wrap ``module`` so that each backward averages its gradients over the process group.

    Every rank builds the same model and wraps it; each trains on its own part of the data
    (``loss.backward()`` then leaves the average of the ranks' gradients in ``.grad``, identical
    everywhere, and each rank's optimizer takes the same step).

    Args:
        module: the model (its parameters that require grad are synchronised).
        device_ids, output_device: for a module on one GPU: that device (a one-element list of an
            index or a device; the output device defaults to it), to which each forward moves its
            tensor inputs; a CPU module, or one on several devices, takes neither (as in PyTorch).
        dim: accepted for compatibility (inputs are not scattered).
        broadcast_buffers: broadcast rank 0's buffers at the start of every forward.
        process_group: the group to average over (default: the world).
        bucket_cap_mb: bucket size; None: ``[ddp] bucket_cap_mb`` (25) with a 1 MiB first bucket.
        find_unused_parameters: find, after each forward, the parameters its outputs do not
            reach, and do not wait for their gradients (default ``[ddp] find_unused_parameters``).
        gradient_as_bucket_view: ``.grad`` becomes a view of the bucket (no copy back).
        static_graph: the same parameters are used in every iteration; unused ones are found as
            with ``find_unused_parameters`` and buckets are rebuilt after the first iteration.

    Raises:
        ZgradError: not initialized; no parameter requires a gradient ("DistributedDataParallel is
            not needed when a module doesn't have any parameter that requires a gradient.");
            ranks' models differ ("DDP expects same model across all ranks, ..." or "... appears
            not to match sizes of the same param in process 0.").
        ValueError: ``device_ids`` or ``output_device`` for a CPU module; more than one device id;
            parameters on different device types.

    Blocks during construction: it runs collectives with every rank of the group.

    Example::

        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29500", rank=rank, world_size=2)
        model = DDP(nn.Linear(10, 10))
        loss = F.mse_loss(model(x), y)
        loss.backward()              # returns once .grad holds the average over both ranks
        optimizer.step()
    """

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group: ProcessGroup | None = None,
                 bucket_cap_mb: float | None = None, find_unused_parameters: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False) -> None:
        super().__init__()
        self.module = module
        named = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise ZgradError("DistributedDataParallel is not needed when a module doesn't have any parameter that "
                             "requires a gradient.")
        self.device_ids, self.output_device = _device_indices(module, device_ids, output_device)
        world = current_world()
        self.process_group = process_group if process_group is not None else world.default
        config = world.config.ddp
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters or config.find_unused_parameters
        self.static_graph = static_graph
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.join_config: JoinConfig | None = None
        self.authoritative_rank = 0
        names, params = [n for n, _ in named], [p for _, p in named]
        self._verify_params_across_processes(params)
        self.sync_module_states(0)
        cap = int((config.bucket_cap_mb if bucket_cap_mb is None else bucket_cap_mb) * _MIB)
        limits = [FIRST_BUCKET_BYTES, cap] if bucket_cap_mb is None else [cap]
        initial = sorted(assign_buckets(params, range(len(params)), limits), key=min)[::-1]
        self.reducer = Reducer(
            params, names, self.process_group, initial, limits, find_unused_parameters=self.find_unused_parameters,
            static_graph=static_graph, gradient_as_bucket_view=gradient_as_bucket_view, debug_detail=debug_detail())

    # --- construction-time checks and state ------------------------------------------------------

    def _verify_params_across_processes(self, params: list[Tensor]) -> None:
        """Every rank must hold as many parameters as rank 0, of the same shapes (PyTorch's texts)."""
        pg = self.process_group
        shapes = np.array([d for p in params for d in (p.ndim, *p.shape)], np.int64)
        mine = np.array([len(params), shapes.size], np.int64)
        counts = [np.zeros(2, np.int64) for _ in range(pg.size())]
        ops.all_gather(pg, counts, mine, False, [], label="ddp_verify_params")
        for rank, (count, _) in enumerate(counts):
            if count != len(params):
                raise ZgradError(f"DDP expects same model across all ranks, but Rank {pg.rank()} has {len(params)} params, "
                                 f"while rank {rank} has inconsistent {count} params.")
        longest = int(max(c[1] for c in counts))
        metadata = np.full(longest, -1, np.int64)
        metadata[:shapes.size] = shapes
        ops.broadcast(pg, metadata, 0, False, [], label="ddp_verify_shapes")
        mismatch, position = -1, 0
        for index, p in enumerate(params):
            expected = metadata[position:position + 1 + p.ndim]
            if mismatch < 0 and (expected.size != 1 + p.ndim or expected[0] != p.ndim or tuple(expected[1:]) != tuple(p.shape)):
                mismatch = index
            position += 1 + p.ndim
        verdicts = [np.zeros(1, np.int64) for _ in range(pg.size())]  # so that every rank fails, not only the odd one
        ops.all_gather(pg, verdicts, np.array([mismatch], np.int64), False, [], label="ddp_verify_verdict")
        if mismatch >= 0:
            raise ZgradError(f"[{pg.rank()}]: params[{mismatch}] in this process with sizes {list(params[mismatch].shape)} "
                             "appears not to match sizes of the same param in process 0.")
        odd = [(rank, int(v[0])) for rank, v in enumerate(verdicts) if v[0] >= 0]
        if odd:
            raise ZgradError("DDP expects same model across all ranks, but " + "; ".join(
                f"[{rank}]: params[{index}] appears not to match sizes of the same param in process 0" for rank, index in odd))

    def sync_module_states(self, root: int) -> None:
        """Broadcast group rank ``root``'s parameters and buffers (one flat buffer per dtype)."""
        tensors = [p for p in self.module.parameters()] + [b for b in self.module.buffers()]
        by_dtype: dict[np.dtype, list[Tensor]] = {}
        for t in tensors:
            by_dtype.setdefault(t.dtype, []).append(t)
        for group in by_dtype.values():
            flat = np.concatenate([dispatch.host_buffer(t._data).reshape(-1) for t in group])
            ops.broadcast(self.process_group, flat, root, False, [], label="ddp_sync_module_states")
            offset = 0
            for t in group:
                part = flat[offset:offset + t._data.size].reshape(t.shape)
                dispatch.copy_into(t._data, dispatch.to_device(part, dispatch.device_type_of(t._data)))
                offset += t._data.size

    def sync_buffers(self) -> None:
        """Broadcast the authoritative rank's buffers, when ``broadcast_buffers`` and there are any."""
        buffers = list(self.module.buffers())
        if not (self.broadcast_buffers and buffers and self.require_forward_param_sync):
            return
        for buf in buffers:
            data = buf._data if buf._data.flags.c_contiguous else np.ascontiguousarray(buf._data)
            ops.broadcast(self.process_group, data, self.authoritative_rank, False, [], label="ddp_sync_buffers")
            if data is not buf._data:
                buf._data[...] = data

    # --- training ----------------------------------------------------------------------------------

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """Run the module; with grad enabled (and not in ``no_sync``), the next backward averages.

        Raises:
            ZgradError: the previous iteration's reduction did not finish ("Expected to have
                finished reduction in the prior iteration ...").
        """
        reducer = self.reducer
        reducer.ensure_prior_reduction_finished()
        notify_join_context(self)
        grad_enabled = is_grad_enabled()
        if grad_enabled:
            reducer.rebuild_buckets()
        self.sync_buffers()
        if self.join_config is not None and self.join_config.enable:
            check_global_requires_backward_grad_sync(self, joined=False)
        if self.device_ids:
            device = f"cuda:{self.device_ids[0]}"
            inputs, kwargs = _moved_to(inputs, device), _moved_to(kwargs, device)
        output = self.module(*inputs, **kwargs)
        if grad_enabled and self.require_backward_grad_sync:
            self.require_forward_param_sync = True
            reducer.prepare_for_backward(output)
        else:
            self.require_forward_param_sync = False
        return output

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside accumulate gradients locally, with no communication; the first
        synchronised backward after it averages the accumulated sums.

        Example::

            with ddp.no_sync():
                ddp(x1).sum().backward()
            ddp(x2).sum().backward()   # averages the gradients of x1 and x2 over the ranks
        """
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    def register_comm_hook(self, state: Any, hook: Callable[[Any, GradBucket], Future]) -> None:
        """Reduce buckets with ``hook(state, bucket) -> Future`` of the reduced flat tensor (see
        ``zgrad.distributed.algorithms.ddp_comm_hooks.default_hooks``). Hooks run in bucket index
        order, on the thread running backward; the gradients are not pre-divided.

        Raises:
            ZgradError: a hook was registered already. TypeError: ``hook`` is not callable.
        """
        self.reducer.register_comm_hook(state, hook)

    def join(self, divide_by_initial_world_size: bool = True, enable: bool = True,
             throw_on_early_termination: bool = False) -> Join:
        """A context manager for ranks with different numbers of batches (see ``join.py``).

        Example::

            with ddp.join():
                for x in my_batches:          # some ranks have fewer
                    ddp(x).sum().backward()
        """
        return Join(self, enable, throw_on_early_termination, divide_by_initial_world_size)

    def extra_repr(self) -> str:
        return f"process_group={self.process_group!r}, buckets={len(self.reducer.buckets)}"
