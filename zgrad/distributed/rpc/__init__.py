"""``zgrad.distributed.rpc``: remote calls and remote references between workers.

Mirrors ``torch.distributed.rpc``: ``init_rpc``, ``rpc_sync``, ``rpc_async``, ``remote``,
``RRef``, ``get_worker_info``, ``shutdown``, ``functions.async_execution``,
``TensorPipeRpcBackendOptions``. Values travel through a safe codec (no pickle); call targets,
function values and the classes of objects sent resolve only from allowed modules.
"""

from zgrad.distributed.rpc import functions
from zgrad.distributed.rpc.api import (
    bind_worker, get_debug_info, get_worker_info, init_rpc, remote, rpc_async, rpc_sync, shutdown,
)
from zgrad.distributed.rpc.codec import CodecError
from zgrad.distributed.rpc.options import BackendType, RpcBackendOptions, TensorPipeRpcBackendOptions
from zgrad.distributed.rpc.rref import RRef
from zgrad.distributed.rpc.targets import TargetError
from zgrad.distributed.rpc.worker_info import WorkerInfo
from zgrad.errors import RemoteError, WorkerUnavailableError, ZgradTimeoutError
from zgrad.futures import Future

__all__ = [
    "BackendType", "CodecError", "Future", "RRef", "RemoteError", "RpcBackendOptions", "TargetError",
    "TensorPipeRpcBackendOptions", "WorkerInfo", "WorkerUnavailableError", "ZgradTimeoutError", "bind_worker",
    "functions", "get_debug_info", "get_worker_info", "init_rpc", "remote", "rpc_async", "rpc_sync", "shutdown",
]
