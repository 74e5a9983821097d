"""Device maps: on which device a tensor sent to a peer lands there (PyTorch's ``set_device_map``).

A worker's map for peer P says, for each of its devices, the device of P that its tensors go to
(``{"cuda:0": "cpu"}``: CUDA tensors sent to P arrive on P's CPU). The sender applies it to the
arguments it sends; results coming back from P travel the inverse map. Without a map a tensor
lands on the device of the same name (a CUDA tensor on the receiver's CUDA device). zgrad uses one
CUDA device per process, so the devices are ``"cpu"`` and ``"cuda:0"``.

Maps come from ``[rpc] device_maps`` (``worker1 = { "cuda:0" = "cpu" }``) or from
``TensorPipeRpcBackendOptions.set_device_map``.
"""

from __future__ import annotations

from typing import Any, Mapping

from zgrad.errors import ConfigError

__all__ = ["DEVICES", "device_name", "check_device_maps", "inverse"]

DEVICES = ("cpu", "cuda:0")  # the device names a map, and a tensor's reference on the wire, may hold


def device_name(device: Any, what: str) -> str:
    """``device`` ("cpu", "cuda", "cuda:0", 0, a zgrad device) as "cpu" or "cuda:0".

    Raises:
        ConfigError: another device type, or a CUDA device other than 0.
    """
    text = f"cuda:{device}" if isinstance(device, int) and not isinstance(device, bool) else str(device)
    kind, _, index = text.partition(":")
    if kind == "cpu" and index in ("", "0"):
        return "cpu"
    if kind == "cuda" and index in ("", "0"):
        return "cuda:0"
    if kind == "cuda" and index.isdigit():
        raise ConfigError(f"{what} names {text!r}; zgrad uses one CUDA device per process, 'cuda:0' (start one worker "
                          "per GPU and select it with CUDA_VISIBLE_DEVICES)")
    raise ConfigError(f"{what} names the device {device!r}; expected 'cpu' or 'cuda:0'")


def check_device_maps(maps: Mapping[str, Mapping[Any, Any]], what: str) -> dict[str, dict[str, str]]:
    """``maps`` (peer name -> {local device: peer's device}) with device names normalized.

    Raises:
        ConfigError: a bad device, or two local devices mapped to the same device of one peer
            (the results could not be mapped back).
    """
    if not isinstance(maps, Mapping):
        raise ConfigError(f"{what} must be a table of peer name -> {{device = device}}, got {type(maps).__name__}")
    checked: dict[str, dict[str, str]] = {}
    for peer, device_map in maps.items():
        where = f"{what}[{peer!r}]"
        if not isinstance(device_map, Mapping):
            raise ConfigError(f"{where} must be a table of device -> device, got {type(device_map).__name__}")
        mapped = {device_name(k, where): device_name(v, where) for k, v in device_map.items()}
        if len(set(mapped.values())) != len(mapped):
            raise ConfigError(f"{where} maps two devices to one device of {peer!r}: {mapped}; a device map must be "
                              "one-to-one so that results can travel back")
        checked[str(peer)] = mapped
    return checked


def inverse(device_map: Mapping[str, str] | None) -> dict[str, str] | None:
    """The map results from the peer travel: ``device_map`` read backwards."""
    return None if not device_map else {remote: local for local, remote in device_map.items()}
