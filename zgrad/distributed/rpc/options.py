"""PyTorch's RPC backend options, mapped onto zgrad's config.

``TensorPipeRpcBackendOptions`` (alias ``RpcBackendOptions``) keeps PyTorch scripts that pass
``rpc_backend_options=`` to ``init_rpc`` running unchanged; zgrad's mesh takes its settings:

=======================  =====================================================================
option                   becomes
=======================  =====================================================================
``num_worker_threads``   ``[rpc] num_worker_threads``
``rpc_timeout``          ``[rpc] default_timeout_s`` (seconds; 0 = no timeout)
``init_method``          ``"env://"``: ``MASTER_ADDR`` / ``MASTER_PORT`` (the default);
                         ``"tcp://host:port"``: rank 0's rendezvous address
``device_maps``          ``[rpc] device_maps`` (``device_maps.py``: where tensors sent to a peer
                         land; devices are ``"cpu"`` and ``"cuda:0"``)
``devices``              checked (``"cpu"``, ``"cuda:0"``); zgrad uses one CUDA device a process
=======================  =====================================================================
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Mapping
from urllib.parse import urlsplit

from zgrad.config import Config
from zgrad.distributed.rpc.device_maps import check_device_maps, device_name
from zgrad.errors import ConfigError

__all__ = ["BackendType", "TensorPipeRpcBackendOptions", "RpcBackendOptions", "apply_backend_options",
           "rendezvous_of"]


class BackendType(enum.Enum):
    """RPC backends by PyTorch's names; all of them are zgrad's ZeroMQ mesh."""

    TENSORPIPE = "TENSORPIPE"
    ZMQ = "ZMQ"


class TensorPipeRpcBackendOptions:
    """PyTorch's RPC options (attributes may also be set after construction, as in PyTorch).

    Args:
        num_worker_threads: threads running incoming calls.
        rpc_timeout: default timeout of calls in seconds (0: none).
        init_method: ``"env://"`` or ``"tcp://host:port"`` of rank 0.
        device_maps: peer name -> {this worker's device: the peer's device} (``device_maps.py``).
        devices: the devices this worker uses ("cpu", "cuda:0"); checked, otherwise informational.
    """

    def __init__(self, *, num_worker_threads: int = 16, rpc_timeout: float = 60.0, init_method: str = "env://",
                 device_maps: Mapping[str, Mapping[Any, Any]] | None = None, devices: list[Any] | None = None,
                 _transports: Any = None, _channels: Any = None) -> None:
        self.num_worker_threads = num_worker_threads
        self.rpc_timeout = rpc_timeout
        self.init_method = init_method
        self.device_maps = dict(device_maps or {})
        self.devices = list(devices or [])

    def set_device_map(self, to: str, device_map: Mapping[Any, Any]) -> None:
        """Send tensors on this worker's devices to ``to``'s devices: ``{"cuda:0": "cpu"}`` makes
        CUDA tensors arrive on ``to``'s CPU (results come back through the inverse map).

        Raises:
            ConfigError: a device other than "cpu" and "cuda:0", or a map that is not one-to-one.
        """
        merged = {**self.device_maps.get(to, {}), **device_map}
        self.device_maps[to] = check_device_maps({to: merged}, "set_device_map")[to]

    def set_devices(self, devices: list[Any]) -> None:
        """The devices this worker uses ("cpu", "cuda:0"). Raises ConfigError for any other."""
        self.devices = [device_name(d, "set_devices") for d in devices]

    def __repr__(self) -> str:
        return (f"TensorPipeRpcBackendOptions(num_worker_threads={self.num_worker_threads}, "
                f"rpc_timeout={self.rpc_timeout}, init_method={self.init_method!r})")


RpcBackendOptions = TensorPipeRpcBackendOptions


def apply_backend_options(config: Config, options: TensorPipeRpcBackendOptions | None) -> Config:
    """``config`` with the options' thread count, timeout and device maps in ``[rpc]``.

    Raises:
        ConfigError: an option of the wrong type or out of range, or a bad device or device map.
    """
    maps = check_device_maps(config.rpc.device_maps, "config key 'rpc.device_maps'")
    if options is None:
        return dataclasses.replace(config, rpc=dataclasses.replace(config.rpc, device_maps=maps))
    if not isinstance(options, TensorPipeRpcBackendOptions):
        raise ConfigError(f"rpc_backend_options must be a TensorPipeRpcBackendOptions, got {type(options).__name__}")
    threads, timeout = options.num_worker_threads, options.rpc_timeout
    if isinstance(threads, bool) or not isinstance(threads, int) or threads <= 0:
        raise ConfigError(f"rpc_backend_options.num_worker_threads got {threads!r}; expected an integer > 0")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise ConfigError(f"rpc_backend_options.rpc_timeout got {timeout!r}; expected seconds >= 0 (0: no timeout)")
    for device in options.devices:
        device_name(device, "rpc_backend_options.devices")
    maps.update(check_device_maps(options.device_maps, "rpc_backend_options.device_maps"))
    rpc = dataclasses.replace(config.rpc, num_worker_threads=threads, default_timeout_s=float(timeout), device_maps=maps)
    return dataclasses.replace(config, rpc=rpc)


def rendezvous_of(options: TensorPipeRpcBackendOptions | None) -> tuple[str, int] | None:
    """Rank 0's address from ``init_method = "tcp://host:port"``; None for ``env://`` or no options.

    Raises:
        ConfigError: another scheme, or a tcp address without host or port.
    """
    if options is None or options.init_method in ("", "env://"):
        return None
    parts = urlsplit(str(options.init_method))
    if parts.scheme != "tcp":
        raise ConfigError(f"rpc_backend_options.init_method {options.init_method!r} is not supported; "
                          "use 'env://' (MASTER_ADDR, MASTER_PORT) or 'tcp://host:port'")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        raise ConfigError(f"rpc_backend_options.init_method {options.init_method!r} needs a host and a port: 'tcp://host:port'")
    return parts.hostname, port
