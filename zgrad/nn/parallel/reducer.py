"""DDP's reducer: marks parameters ready as backward accumulates their gradients, reduces full
buckets while backward goes on, and puts the averages back before backward returns.

Per iteration (one forward through DDP, one backward):

* ``prepare_for_backward`` (from DDP's forward): every bucket waits for all its parameters; with
  ``find_unused_parameters`` the parameters the outputs do not reach are noted.
* A gradient backward makes for a parameter without one goes straight into the parameter's slot
  of its bucket (``AccumulateGrad.destination``); each parameter's post-accumulate hook (on the
  thread running backward) copies any other gradient there. Buckets are averaged by the
  all-reduce (``AVG``), or by the comm hook if one is registered.
  A bucket whose parameters are all ready is reduced at once, asynchronously, and buckets start
  strictly in index order on every rank (a later bucket that is ready first waits for the
  earlier ones), so every rank issues the same collectives in the same order. The first hook
  queues :meth:`Reducer._finalize` for the end of the backward pass and marks the unused
  parameters ready (their slots are zeros).
* ``_finalize`` waits for every bucket and writes the averages back where the pass keeps
  gradients (``.grad``, or the distributed autograd context). With ``find_unused_parameters``,
  a parameter no rank used keeps its gradient as it was.

A parameter that got no gradient without ``find_unused_parameters`` leaves its bucket unready:
``_finalize`` then runs a marker collective in that bucket's place, so the ranks that did
reduce it fail at once instead of waiting, and every rank raises PyTorch's "Expected to have
finished reduction in the prior iteration ..." error, listing the parameters; the next forward
raises it again.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from zgrad.distributed.collectives import ops
from zgrad.distributed.collectives.fingerprint import ReduceOp
from zgrad.distributed.collectives.process_group import ProcessGroup
from zgrad.distributed.collectives.state import bind_thread
from zgrad.engine.graph import AccumulateGrad
from zgrad.engine.graph_task import GraphTask, current_graph_task
from zgrad.errors import CollectiveError, ZgradError
from zgrad.futures import Future
from zgrad.kernels import dispatch, dispatch_collectives
from zgrad.nn.parallel.buckets import Bucket, GradBucket, assign_buckets
from zgrad.tensor import Tensor

__all__ = ["Reducer", "unreached_parameters"]

_UNREADY = "ddp_unready"
_UNREADY_SEEN = re.compile(r"rank (\d+) is running collective: " + _UNREADY + r"\[([\d ]*)\]")


def unreached_parameters(outputs: Any, params: Sequence[Tensor]) -> list[int]:
    """Indices of ``params`` that no tensor in ``outputs`` (nested lists, tuples, dicts) reaches
    through the autograd graph."""
    stack, seen, reached = [], set(), set()
    pending = [outputs]
    while pending:
        item = pending.pop()
        if isinstance(item, Tensor):
            if item.grad_fn is not None:
                stack.append(item.grad_fn)
            elif item.requires_grad:
                reached.add(id(item))
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if isinstance(node, AccumulateGrad):
            reached.add(id(node.variable))
        stack.extend(edge.node for edge in node.next_edges if edge is not None)
    return [i for i, p in enumerate(params) if id(p) not in reached]


class Reducer:
    """Gradient buckets of one DDP module and their reduction.

    Args:
        params: the module's parameters that require grad (indices are positions here).
        names: their qualified names (for error messages with debug details).
        pg: the process group to reduce over.
        assignment: the initial buckets, as parameter indices per bucket.
        rebuild_limits: the bucket size limits (bytes) for the rebuild after the first iteration.
        find_unused_parameters, static_graph, gradient_as_bucket_view: DDP's options.
        debug_detail: name parameters in errors (``TORCH_DISTRIBUTED_DEBUG=DETAIL``).
    """

    def __init__(self, params: list[Tensor], names: list[str], pg: ProcessGroup, assignment: list[list[int]],
                 rebuild_limits: list[int], *, find_unused_parameters: bool, static_graph: bool,
                 gradient_as_bucket_view: bool, debug_detail: bool) -> None:
        self.params, self.names, self.pg = params, names, pg
        self.find_unused = find_unused_parameters or static_graph
        self.static_graph = static_graph
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.debug_detail = debug_detail
        self.rebuild_limits = rebuild_limits
        self.divide_by = pg.size()
        # False: buckets are all-reduced with AVG (sum, then / group size). True (join with
        # divide_by_initial_world_size=False): each gradient is divided by ``divide_by`` on its
        # way into the bucket, then summed.
        self.prescale = False
        self.comm_hook: tuple[Any, Callable[[Any, GradBucket], Future]] | None = None
        self._lock = threading.Lock()
        self._build(assignment)
        for i, p in enumerate(params):
            p.register_post_accumulate_grad_hook(functools.partial(self._autograd_hook, i))
        self.expect_hooks = False
        self._ready = [False] * len(params)
        self._fresh = [True] * len(params)
        self._unused: list[int] = []
        self._local_used = np.zeros(len(params), np.int32) if self.find_unused else None
        self._finalize_queued = False
        self._ready_order: list[int] = []
        self.rebuild_due = False  # a first iteration finished (or join pushed every parameter)
        self.has_rebuilt = False
        self.failure: BaseException | None = None
        self.before_first_hook: Callable[[], None] | None = None  # join: learn the divisor

    # --- buckets ----------------------------------------------------------------------------------

    def _build(self, assignment: list[list[int]]) -> None:
        self.buckets = [Bucket(b, indices, self.params) for b, indices in enumerate(assignment)]
        self._where = {i: (bucket, pos) for bucket in self.buckets for pos, i in enumerate(bucket.params)}
        self._next_bucket = 0
        if self.gradient_as_bucket_view:
            for bucket in self.buckets:
                for i, view in zip(bucket.params, bucket.views):
                    grad = self.params[i].grad
                    if grad is not None:
                        dispatch.copy_into(view, grad._data)
                        self.params[i]._set_grad_array(view)

    def rebuild_buckets(self) -> bool:
        """Rebuild the buckets once, in the order gradients became ready in the first iteration
        (rank 0's, broadcast so every rank has the same buckets). A collective: every rank calls
        it at the same point. Returns whether it rebuilt."""
        if self.has_rebuilt or not self.rebuild_due or (self.find_unused and not self.static_graph):
            return False
        seen = set(self._ready_order)
        order = np.array(self._ready_order + [i for i in range(len(self.params)) if i not in seen], np.int64)
        ops.broadcast(self.pg, order, 0, False, [], label="ddp_rebuild_buckets")
        self._build(assign_buckets(self.params, order.tolist(), self.rebuild_limits))
        self.has_rebuilt = True
        return True

    def push_all_rebuilt_params(self) -> None:
        """A rank with nothing of its own to record (joined early) rebuilds with the default order."""
        self.rebuild_due = True

    # --- one iteration ----------------------------------------------------------------------------

    def ensure_prior_reduction_finished(self) -> None:
        """Raise the error of the last iteration again, if it failed (PyTorch raises it here)."""
        if self.failure is not None:
            raise self.failure

    def prepare_for_backward(self, outputs: Any) -> None:
        """The forward of an iteration ran with gradient sync: the next backward reduces."""
        self.ensure_prior_reduction_finished()
        with self._lock:
            for bucket in self.buckets:
                bucket.reset()
            self._next_bucket = 0
            self._ready = [False] * len(self.params)
            self._fresh = [p.grad is None for p in self.params]
            for bucket in self.buckets:  # a new gradient goes straight into its bucket slot
                for i, view in zip(bucket.params, bucket.views):
                    self.params[i]._grad_accumulator().destination = \
                        (lambda v=view: v) if self._fresh[i] and not self.gradient_as_bucket_view else None
            self._finalize_queued = False
            if self._local_used is not None:
                self._local_used[:] = 0
            self.expect_hooks = True
        if self.find_unused and not (self.static_graph and self.has_rebuilt):
            self._unused = unreached_parameters(outputs, self.params)

    def _autograd_hook(self, index: int, param: Tensor) -> None:
        if not self.expect_hooks:
            return  # no_sync, or a backward without a forward through DDP: gradients stay local
        task = current_graph_task()
        with self._lock:
            first = not self._finalize_queued
            self._finalize_queued = True
        if first:
            task.queue_callback(functools.partial(self._finalize, task))
            if self.before_first_hook is not None:
                self.before_first_hook()
            for unused in self._unused:
                self._mark_ready(unused, task, used=False)
        self._mark_ready(index, task, used=True)

    def _mark_ready(self, index: int, task: GraphTask, used: bool) -> None:
        bucket, pos = self._where[index]
        view = bucket.views[pos]
        grad = task.leaf_gradient(self.params[index]) if used else None
        if grad is None:
            view[...] = 0
        elif not self.prescale:  # averaged by the all-reduce (AVG), or by the comm hook
            if grad is not view:
                dispatch.copy_into(view, grad)
        elif grad is view:
            dispatch_collectives.divide_inplace(view.reshape(-1), self.divide_by)
        else:
            dispatch_collectives.scale_copy(view.reshape(-1), grad, self.divide_by)
        with self._lock:  # buckets are launched under the lock: in index order whatever thread marks
            self._ready[index] = True
            if not self.has_rebuilt:
                self._ready_order.append(index)
            if used and self._local_used is not None:
                self._local_used[index] = 1
            bucket.pending -= 1
            while self._next_bucket < len(self.buckets) and self.buckets[self._next_bucket].pending == 0:
                self._launch(self.buckets[self._next_bucket])
                self._next_bucket += 1

    def _launch(self, bucket: Bucket) -> None:
        if self.comm_hook is None:
            op = ReduceOp.SUM if self.prescale else ReduceOp.AVG
            work = ops.all_reduce(self.pg, bucket.buffer, op, True, [Tensor(bucket.buffer)])
            bucket.future = work.get_future()
            return
        state, hook = self.comm_hook
        previous = bind_thread(self.pg.world)  # so that group=None in the hook means this DDP's world
        try:
            future = hook(state, GradBucket(bucket, self.params, len(self.buckets) - 1))
        finally:
            bind_thread(previous)
        if not isinstance(future, Future):
            raise TypeError(f"a DDP communication hook must return a zgrad.futures.Future, got {type(future).__name__}")
        bucket.future = future

    def _finalize(self, task: GraphTask) -> None:
        """End of backward: every bucket reduced, averages in place. Blocks (bounded by the group's
        timeout, through the collectives)."""
        self.expect_hooks = False
        for param in self.params:  # what the pass did not use (no gradient) must not stay armed
            param._grad_accumulator().destination = None
        unready = [i for i, ready in enumerate(self._ready) if not ready]
        if unready:
            self._fail_unready(unready)
        used = None
        if self._local_used is not None:
            used = self._local_used.copy()
            self._reduce_used(used)
        try:
            for bucket in self.buckets:
                self._settle(bucket, task, used)
        except CollectiveError as exc:
            self.failure = self._explain(exc)
            raise self.failure from exc
        self.rebuild_due = True

    def _reduce_used(self, used: np.ndarray) -> None:
        ops.all_reduce(self.pg, used, ReduceOp.MAX, False, [], label="ddp_unused_parameters")

    def _settle(self, bucket: Bucket, task: GraphTask, used: np.ndarray | None) -> None:
        value = bucket.future.wait()
        reduced = value[0] if isinstance(value, list) else value
        if not isinstance(reduced, Tensor) or reduced._data.size != bucket.buffer.size:
            raise ZgradError(f"the communication hook's future for bucket {bucket.index} must hold a tensor of "
                             f"{bucket.buffer.size} elements (the bucket's buffer), got {reduced!r}")
        if not _same_memory(reduced._data, bucket.buffer):
            dispatch.copy_into(bucket.buffer, reduced._data.reshape(-1))
        for i, view in zip(bucket.params, bucket.views):
            if used is not None and not used[i]:
                continue  # no rank used it: its gradient stays as it was
            param = self.params[i]
            if self.gradient_as_bucket_view:
                task.set_leaf_gradient(param, view)
                continue
            if self._fresh[i] or task.leaf_store is not None:
                # The gradient was made by this backward (straight into the bucket, when the pass
                # keeps .grad): the average replaces it, no copy back (the bucket takes new memory
                # next iteration). An older .grad is updated in place.
                if task.leaf_gradient(param) is not view:
                    task.set_leaf_gradient(param, view)
                bucket.handed_out = True
                continue
            grad = task.leaf_gradient(param)
            if grad is not None and grad is not view and grad.flags.writeable and grad.shape == view.shape:
                dispatch.copy_into(grad, view)
            else:
                task.set_leaf_gradient(param, view.copy())

    # --- what went wrong --------------------------------------------------------------------------

    def _fail_unready(self, unready: list[int]) -> None:
        """Some parameters got no gradient: run a marker in the first unready bucket's place (the
        ranks that reduce it fail at once), then fail this iteration here too."""
        try:  # issued after the buckets launched so far: where the first unready one is elsewhere
            ops.marker(self.pg, f"{_UNREADY}[{' '.join(map(str, unready))}]")
        except CollectiveError:
            pass  # the others reduce that bucket: they are told; this rank's error follows
        self.failure = ZgradError(self._unused_message(self.pg.world.rank, unready))
        raise self.failure

    def _explain(self, exc: CollectiveError) -> BaseException:
        """Another rank could not reduce a bucket (its marker caused the mismatch): say why."""
        found = _UNREADY_SEEN.search(str(exc))
        if found is None:
            return exc
        return ZgradError(self._unused_message(int(found.group(1)), [int(i) for i in found.group(2).split()]))

    def _unused_message(self, rank: int, unready: list[int]) -> str:
        text = ("Expected to have finished reduction in the prior iteration before starting a new one. This error "
                "indicates that your module has parameters that were not used in producing loss. ")
        if self.static_graph:
            text = ("Expected to have finished reduction in the prior iteration before starting a new one. This error "
                    "indicates that your training graph has changed in this iteration, e.g., one parameter is used in "
                    "first iteration, but then got unused in the second iteration. this is not compatible with "
                    "static_graph set to True.")
        elif not self.find_unused:
            text += ("You can enable unused parameter detection by passing the keyword argument "
                     "`find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and by \n"
                     "making sure all `forward` function outputs participate in calculating loss. ")
        else:
            text += ("Since `find_unused_parameters=True` is enabled, this likely  means that not all `forward` outputs "
                     "participate in computing loss. You can fix this by making sure all `forward` function outputs "
                     "participate in calculating loss. ")
        text += ("\nIf you already have done the above, then the distributed data parallel module wasn't able to locate "
                 "the output tensors in the return value of your module's `forward` function. Please include the loss "
                 "function and the structure of the return value of `forward` of your module when reporting this issue "
                 "(e.g. list, dict, iterable).")
        indices = f"\nParameter indices which did not receive grad for rank {rank}: {' '.join(map(str, unready))}"
        if not self.debug_detail:
            return text + indices + ("\n In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG to "
                                     "either INFO or DETAIL to print out information about which particular parameters "
                                     "did not receive gradient on this rank as part of this error")
        names = ", ".join(self.names[i] for i in unready)
        return text + f"\nParameters which did not receive grad for rank {rank}: {names}" + indices

    # --- comm hooks and join ----------------------------------------------------------------------

    def register_comm_hook(self, state: Any, hook: Callable[[Any, GradBucket], Future]) -> None:
        """Reduce every bucket with ``hook(state, bucket)`` instead of an averaging all-reduce.

        Raises:
            ZgradError: a hook is registered already. TypeError: ``hook`` is not callable.
        """
        if self.comm_hook is not None:
            raise ZgradError("register_comm_hook or register_builtin_comm_hook can only be called once.")
        if not callable(hook):
            raise TypeError(f"a DDP communication hook must be callable, got {type(hook).__name__}")
        self.comm_hook = (state, hook)

    def shadow_backward(self) -> None:
        """A joined rank's part of the others' backward: every bucket reduced with zeros (through
        the comm hook if there is one), then the used-parameter map. Blocks."""
        futures = []
        for bucket in self.buckets:
            bucket.reset()
            bucket.buffer[:] = 0
            self._launch(bucket)
            futures.append(bucket.future)
        for future in futures:
            future.wait()
        if self._local_used is not None:
            self._reduce_used(np.zeros(len(self.params), np.int32))


def _same_memory(a: Any, b: Any) -> bool:
    """Whether arrays ``a`` and ``b`` start at the same address (a device array: the same object)."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.ctypes.data == b.ctypes.data
    return a is b
