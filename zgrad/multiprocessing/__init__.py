"""``zgrad.multiprocessing``: PyTorch's ``torch.multiprocessing`` for zgrad jobs.

``spawn(fn, args, nprocs)`` starts ``nprocs`` children running ``fn(i, *args)`` and raises in
the parent what a child raised (with its traceback); no child outlives the parent. The rest is
the standard library's ``multiprocessing`` (``Process``, ``get_context``, ``set_start_method``,
queues, ...), re-exported so that ``import torch.multiprocessing as mp`` ports by renaming; once
this package is imported, a tensor sent to another process (a spawned child's argument, a
queue) travels by its shared memory, as in PyTorch (:mod:`zgrad.multiprocessing.reductions`).
"""

from multiprocessing import (
    Barrier, Condition, Event, Lock, Manager, Pipe, Process, Queue, RLock, Semaphore, SimpleQueue, active_children,
    cpu_count, current_process, get_all_start_methods, get_context, get_start_method, set_start_method,
)

from zgrad.multiprocessing.reductions import init_reductions
from zgrad.multiprocessing.spawn import (
    ProcessContext, ProcessException, ProcessExitedException, ProcessRaisedException, spawn, start_processes,
)

init_reductions()

__all__ = [
    "Barrier", "Condition", "Event", "Lock", "Manager", "Pipe", "Process", "ProcessContext", "ProcessException",
    "ProcessExitedException", "ProcessRaisedException", "Queue", "RLock", "Semaphore", "SimpleQueue",
    "active_children", "cpu_count", "current_process", "get_all_start_methods", "get_context", "get_start_method",
    "set_start_method", "spawn", "start_processes",
]
