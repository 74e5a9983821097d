"""``zgrad.distributed.rpc``: remote calls and remote references between workers.

Mirrors ``torch.distributed.rpc``: ``init_rpc``, ``rpc_sync``, ``rpc_async``, ``remote``,
``RRef``, ``get_worker_info``, ``shutdown``. Values travel through a safe codec (no pickle);
call targets resolve only from allowed modules.
"""

from zgrad.distributed.rpc.api import (
    bind_worker, get_debug_info, get_worker_info, init_rpc, remote, rpc_async, rpc_sync, shutdown,
)
from zgrad.distributed.rpc.codec import CodecError
from zgrad.distributed.rpc.futures import Future
from zgrad.distributed.rpc.rref import RRef
from zgrad.distributed.rpc.targets import TargetError
from zgrad.distributed.rpc.worker_info import WorkerInfo
from zgrad.errors import RemoteError, WorkerUnavailableError, ZgradTimeoutError

__all__ = [
    "CodecError", "Future", "RRef", "RemoteError", "TargetError", "WorkerInfo", "WorkerUnavailableError",
    "ZgradTimeoutError", "bind_worker", "get_debug_info", "get_worker_info", "init_rpc", "remote", "rpc_async",
    "rpc_sync", "shutdown",
]
