"""The one exception hierarchy of zgrad.

Every error zgrad raises on purpose derives from :class:`ZgradError`, which is a
``RuntimeError`` so that code written against PyTorch (which raises ``RuntimeError``)
keeps working. Messages say what happened, where, and what to do about it.

Standard library only: every layer may import this module.
"""

from __future__ import annotations

__all__ = [
    "ZgradError",
    "ConfigError",
    "DeviceError",
    "ProtocolError",
    "TransportError",
    "WorkerUnavailableError",
    "ZgradTimeoutError",
    "RemoteError",
    "AutogradError",
    "GradcheckError",
    "CollectiveError",
    "CheckpointError",
    "StateDictError",
    "ShapeError",
    "DTypeError",
    "LinAlgError",
    "IndexRangeError",
    "IntegerDivisionByZeroError",
    "OutOfMemoryError",
]


class ZgradError(RuntimeError):
    """Base class of every error raised by zgrad."""


class ConfigError(ZgradError, ValueError):
    """A configuration key, type or value is wrong; the message names the key and what is allowed."""


class ShapeError(ZgradError, ValueError):
    """Tensor shapes do not fit an op (a broadcast, a matmul, a dim or size argument); raised where
    PyTorch raises ``RuntimeError`` for the same input, with its wording where practical."""


class DTypeError(ZgradError, TypeError):
    """A tensor's dtype does not fit an op (an integer tensor where a floating one is needed, a
    result type an in-place op cannot hold); raised where PyTorch raises ``RuntimeError``."""


class DeviceError(ZgradError, ValueError):
    """A device string that names no device zgrad knows: a ``RuntimeError`` as PyTorch raises, and
    a ``ValueError``."""


class IndexRangeError(ZgradError, IndexError):
    """An index value outside the dimension it indexes (gather, scatter, index_add, ...): an
    ``IndexError``, and a ``RuntimeError`` where PyTorch raises one for the same input."""


class IntegerDivisionByZeroError(ZgradError, ZeroDivisionError):
    """An integer division (``//``, ``%``, ``fmod``, ``div`` with a rounding mode) by an integer
    zero: a ``RuntimeError`` with the text "ZeroDivisionError", as PyTorch raises on CPU, and a
    ``ZeroDivisionError`` too."""


class ProtocolError(ZgradError):
    """A message from a peer does not follow the wire protocol."""


class TransportError(ZgradError):
    """The transport could not bind, connect or deliver."""


class WorkerUnavailableError(TransportError):
    """A peer worker is dead, unreachable or was never seen; the message names it."""


class ZgradTimeoutError(ZgradError, TimeoutError):
    """A bounded wait ran past its limit; the message says what was waited for and for how long."""


class RemoteError(ZgradError):
    """An exception raised on another worker, carried back as data.

    Attributes:
        remote_type: qualified name of the original exception type, e.g. ``"ValueError"``.
        remote_message: the original exception's message.
        worker: name of the worker on which it was raised.
        remote_traceback: the formatted traceback text from that worker.
    """

    def __init__(self, remote_type: str, remote_message: str, worker: str, remote_traceback: str = ""):
        self.remote_type = remote_type
        self.remote_message = remote_message
        self.worker = worker
        self.remote_traceback = remote_traceback
        super().__init__(f"{remote_type} on worker {worker!r}: {remote_message}")

    def __reduce__(self):
        return (type(self), (self.remote_type, self.remote_message, self.worker, self.remote_traceback))


class AutogradError(ZgradError):
    """A backward pass cannot run or failed (bad roots, freed graph, invalid gradient)."""


class GradcheckError(ZgradError):
    """``zgrad.autograd.gradcheck`` or ``gradgradcheck`` found a gradient that does not match its
    finite differences (or another of their checks failed); ``zgrad.autograd.gradcheck.GradcheckError``,
    as PyTorch's."""


class CollectiveError(ZgradError):
    """A collective failed: ranks called different collectives, or another rank of the group
    failed one. The group is unusable afterwards (``destroy_process_group``, then init again)."""


class StateDictError(ZgradError, KeyError):
    """``load_state_dict(strict=True)`` met keys missing from the state dict or unexpected in it
    (a RuntimeError as in PyTorch, and a KeyError)."""

    __str__ = BaseException.__str__  # the message as written, not KeyError's quoted form


class CheckpointError(ZgradError):
    """A file given to ``zgrad.load`` is not a safetensors checkpoint, is truncated or damaged, or
    holds a dtype zgrad has no tensors of; the message names the file and what is wrong."""


class LinAlgError(ZgradError):
    """A matrix factorization or solve could not complete (a singular matrix, one that is not
    positive-definite, an algorithm that did not converge); ``zgrad.linalg.LinAlgError``, as
    ``torch.linalg.LinAlgError``."""


class OutOfMemoryError(ZgradError):
    """The device has no memory left for an allocation, after zgrad gave back what it kept for
    reuse and tried again; the message says how much was asked for and how the device's memory is
    used. ``zgrad.cuda.OutOfMemoryError`` and ``zgrad.OutOfMemoryError``, as PyTorch's."""
