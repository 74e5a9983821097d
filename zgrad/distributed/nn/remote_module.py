"""``RemoteModule``: an ``nn.Module`` created on another worker and called there over RPC.

``RemoteModule("ps/cpu", nn.EmbeddingBag, args=(100, 16))`` builds the module on worker ``ps``;
``forward`` runs it there (recorded by distributed autograd inside a context, so gradients reach
its parameters), ``remote_parameters`` returns RRefs for a ``DistributedOptimizer``. The object
itself is a plain value: sent to another worker (as an RPC argument) it arrives with its RRef and
keeps working there.
"""

from __future__ import annotations

from typing import Any, Iterator

from zgrad.distributed import rpc
from zgrad.futures import Future
from zgrad.nn.module import Module

__all__ = ["RemoteModule", "remote_forward", "remote_parameter_rrefs"]


def remote_forward(module_rref: rpc.RRef, args: tuple, kwargs: dict) -> Any:
    """RPC target on the owner: run the module's forward."""
    return module_rref.local_value()(*args, **kwargs)


def remote_parameter_rrefs(module_rref: rpc.RRef, recurse: bool) -> list[rpc.RRef]:
    """RPC target on the owner: an RRef to each of the module's parameters."""
    return [rpc.RRef(param) for param in module_rref.local_value().parameters(recurse=recurse)]


def _parse_remote_device(remote_device: str) -> tuple[str | int, str]:
    """``"worker1/cpu"``, ``"worker1"`` or ``"rank:1/cpu"`` as (worker name or rank, device).

    Raises:
        ValueError: a malformed string, or a device other than the CPU.
    """
    if not isinstance(remote_device, str) or not remote_device or remote_device.count("/") > 1:
        raise ValueError(f"remote_device {remote_device!r} is not of the form 'worker_name/device' or 'worker_name'")
    worker, _, device = remote_device.partition("/")
    device = device or "cpu"
    if not worker:
        raise ValueError(f"remote_device {remote_device!r} names no worker ('worker_name/device')")
    if device != "cpu":
        raise ValueError(f"remote_device {remote_device!r}: only 'cpu' modules exist until zgrad's CUDA backend is built")
    if worker.startswith("rank:"):
        try:
            return int(worker[len("rank:"):]), device
        except ValueError:
            raise ValueError(f"remote_device {remote_device!r}: 'rank:N' needs an integer rank") from None
    return worker, device


class RemoteModule(Module):
    """A module of class ``module_cls`` constructed on the worker ``remote_device`` names.

    Args:
        remote_device: ``"worker1/cpu"``, ``"worker1"`` or ``"rank:1/cpu"``.
        module_cls: an ``nn.Module`` class the remote worker may construct (allow-listed there).
        args, kwargs: the constructor's arguments.

    ``forward`` blocks; ``forward_async`` returns a Future. Construction blocks until the module
    exists (so a failing constructor raises here). Thread-safe as RPC is.

    Example::

        emb = RemoteModule("ps", nn.EmbeddingBag, args=(100, 16), kwargs={"mode": "sum"})
        with dist_autograd.context() as context_id:
            out = emb(indices, offsets)
    """

    def __init__(self, remote_device: str, module_cls: type, args: tuple | None = None,
                 kwargs: dict[str, Any] | None = None) -> None:
        super().__init__()
        worker, device = _parse_remote_device(remote_device)
        self.on = rpc.get_worker_info(worker).name
        self.device = device
        self.module_rref = rpc.remote(self.on, module_cls, args=tuple(args or ()), kwargs=dict(kwargs or {}))
        self.module_rref._get_future().wait()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the remote module's forward on its worker and return the result. Blocks."""
        return rpc.rpc_sync(self.on, remote_forward, args=(self.module_rref, args, kwargs))

    def forward_async(self, *args: Any, **kwargs: Any) -> Future:
        """Start the remote forward; returns a Future of its result."""
        return rpc.rpc_async(self.on, remote_forward, args=(self.module_rref, args, kwargs))

    def remote_parameters(self, recurse: bool = True) -> list[rpc.RRef]:
        """RRefs to the remote module's parameters (for ``DistributedOptimizer``). Blocks."""
        return rpc.rpc_sync(self.on, remote_parameter_rrefs, args=(self.module_rref, recurse))

    def get_module_rref(self) -> rpc.RRef:
        """The RRef of the remote module itself."""
        return self.module_rref

    def parameters(self, recurse: bool = True) -> Iterator[Any]:
        raise ValueError("Method ``parameters`` not supported for RemoteModule; use ``remote_parameters`` "
                         "(RRefs to the parameters on their worker)")

    def named_parameters(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        raise ValueError("Method ``named_parameters`` not supported for RemoteModule; use ``remote_parameters``")

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("Method ``state_dict`` not supported for RemoteModule; fetch it from the module's RRef")

    def __repr__(self) -> str:
        return f"RemoteModule(on={self.on!r}, device={self.device!r})"
