"""Transport lookup by name: the built-ins plus the entry-point group ``zgrad.transports``.

A third party publishes a transport with, in its ``setup.cfg``::

    [options.entry_points]
    zgrad.transports =
        mytransport = mypackage.transport:MyTransport

and a job selects it with ``[transport] kind = "mytransport"``. The built-ins are always
present, even when the installed package metadata is stale; an entry point cannot replace one.
"""

from __future__ import annotations

import importlib.metadata
import logging
import threading

from zgrad.errors import ConfigError, TransportError
from zgrad.transport.base import Transport
from zgrad.transport.builtin import InprocTransport, IpcTransport, TcpTransport

__all__ = ["ENTRY_POINT_GROUP", "TransportRegistry", "default_registry", "get_transport", "available_transports"]

ENTRY_POINT_GROUP = "zgrad.transports"
_BUILTINS: dict[str, type[Transport]] = {t.name: t for t in (TcpTransport, IpcTransport, InprocTransport)}
_log = logging.getLogger(__name__)


class TransportRegistry:
    """Names to :class:`Transport` instances, one instance per name for the registry's life.

    The instance owns any process-wide transport state (the shared inproc context), so there
    is one default registry per process (:func:`default_registry`). Entry points are read on
    each lookup, so a plugin put on ``sys.path`` later is found; a loaded plugin is kept.

    Thread-safe.
    """

    def __init__(self, group: str = ENTRY_POINT_GROUP):
        self._group = group
        self._lock = threading.Lock()
        self._instances: dict[str, Transport] = {}

    def _entry_points(self) -> dict[str, importlib.metadata.EntryPoint]:
        found = {}
        for ep in importlib.metadata.entry_points(group=self._group):
            if ep.name in _BUILTINS:
                continue  # the built-in wins; zgrad's own metadata lists the same classes
            found.setdefault(ep.name, ep)
        return found

    def available(self) -> list[str]:
        """Return the sorted names of every transport that can be selected (built-ins first found)."""
        return sorted({*_BUILTINS, *self._entry_points()})

    def get(self, name: str) -> Transport:
        """Return the transport called ``name``, loading its plugin on first use.

        Raises:
            ConfigError: no transport has that name; the message lists the known ones.
            TransportError: the plugin's entry point fails to load or is not a Transport.
        """
        with self._lock:
            if name in self._instances:
                return self._instances[name]
            if name in _BUILTINS:
                instance = _BUILTINS[name]()
            else:
                eps = self._entry_points()
                if name not in eps:
                    raise ConfigError(
                        f"config key 'transport.kind' got {name!r}; known transports: "
                        f"{', '.join(sorted({*_BUILTINS, *eps}))}. A plugin adds one by publishing an entry "
                        f"point in the group {self._group!r}."
                    )
                instance = _load(eps[name])
            self._instances[name] = instance
            return instance


def _load(ep: importlib.metadata.EntryPoint) -> Transport:
    try:
        obj = ep.load()
    except Exception as exc:
        raise TransportError(
            f"transport plugin {ep.name!r} (entry point {ep.value!r} in group {ep.group!r}) failed to load: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not (isinstance(obj, type) and issubclass(obj, Transport)):
        raise TransportError(
            f"transport plugin {ep.name!r} (entry point {ep.value!r}) names {obj!r}, "
            "which is not a subclass of zgrad.transport.Transport"
        )
    _log.debug("loaded transport plugin %r from %s", ep.name, ep.value)
    return obj()


_DEFAULT = TransportRegistry()


def default_registry() -> TransportRegistry:
    """Return the process-wide registry (it owns the shared inproc context)."""
    return _DEFAULT


def get_transport(name: str) -> Transport:
    """Return the transport called ``name`` from the default registry. See :meth:`TransportRegistry.get`."""
    return _DEFAULT.get(name)


def available_transports() -> list[str]:
    """Return the sorted names of every selectable transport (built-ins and plugins)."""
    return _DEFAULT.available()
