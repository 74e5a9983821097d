"""CURVE keys and the ZAP allow-list.

Key layout in ``[security] key_dir`` (written by :func:`generate_keys`, the helper behind
``zgrad-launch keygen --out DIR --workers N``)::

    worker-<rank>.key          public key (ZPL certificate); every host needs all of them
    worker-<rank>.key_secret   public + secret key; only the host running that rank needs it
    agent.key, agent.key_secret  the pair every launcher agent (zgrad-run) holds for the rendezvous

Worker ``r`` serves CURVE with its own secret key, dials each peer with that peer's public key
from ``key_dir``, and its ZAP handler admits exactly the public keys ``worker-*.key`` of ranks
``0 .. world_size - 1``, binding each key to its rank: a peer cannot claim another rank.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth
from zmq.utils import z85

from zgrad.errors import ConfigError

__all__ = ["CurveKeys", "ZAP_DOMAIN", "ZapHandler", "generate_keys", "load_curve_keys"]

ZAP_DOMAIN = b"zgrad"
AGENT_KEY_STEM = "agent"  # the key pair launcher agents share (zgrad.transport.control)
ZAP_ENDPOINT = "inproc://zeromq.zap.01"
_log = logging.getLogger(__name__)


def _stem(rank: int) -> str:
    return f"worker-{rank}"


def key_files(key_dir: str | os.PathLike, rank: int) -> tuple[Path, Path]:
    """Where rank ``rank``'s CURVE keys live in ``key_dir``: its public key file
    ``worker-<rank>.key`` (every worker needs it) and its secret key file
    ``worker-<rank>.key_secret`` (only the host running that rank does)."""
    stem = Path(key_dir) / _stem(rank)
    return stem.with_name(stem.name + ".key"), stem.with_name(stem.name + ".key_secret")


def generate_keys(out_dir: str | os.PathLike, num_workers: int) -> list[Path]:
    """Write a CURVE key pair per worker into ``out_dir`` (created if missing), and the pair the
    launchers' agents share for their rendezvous (``agent.key``, ``agent.key_secret``).

    Args:
        out_dir: directory to write ``worker-<rank>.key`` and ``worker-<rank>.key_secret`` into.
        num_workers: how many workers (ranks ``0 .. num_workers - 1``).

    Returns:
        The paths written, public and secret file of each rank in rank order, then the agents'.
        Secret files are readable by the owner only.

    Raises:
        ValueError: ``num_workers`` is smaller than 1.
        FileExistsError: a key file for one of the ranks is already there (delete it to renew).
    """
    if num_workers < 1:
        raise ValueError(f"generate_keys needs num_workers >= 1; got {num_workers}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stems = [_stem(rank) for rank in range(num_workers)] + [AGENT_KEY_STEM]
    for stem in stems:
        for path in (out / f"{stem}.key", out / f"{stem}.key_secret"):
            if path.exists():
                raise FileExistsError(f"key file {path} already exists; remove the old keys or pick another directory")
    written: list[Path] = []
    for stem in stems:
        public, secret = zmq.auth.create_certificates(out, stem)
        os.chmod(secret, 0o600)
        written += [Path(public), Path(secret)]
    return written


@dataclass(frozen=True)
class CurveKeys:
    """One worker's CURVE material (z85-encoded keys).

    Attributes:
        public: this worker's public key.
        secret: this worker's secret key.
        peers: public key of every rank of the job, by rank (this worker's included).
    """

    public: bytes
    secret: bytes
    peers: Mapping[int, bytes]


def load_curve_keys(key_dir: str | os.PathLike, rank: int, world_size: int) -> CurveKeys:
    """Load the keys worker ``rank`` needs from ``key_dir``.

    Raises:
        ConfigError: a key file is missing or unreadable; the message names it and the fix.
    """
    directory = Path(key_dir)

    def load(path: Path) -> tuple[bytes, bytes | None]:
        try:
            return zmq.auth.load_certificate(path)
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"cannot load CURVE key {str(path)!r} for 'security.key_dir' ({exc}); create the keys with "
                f"`zgrad-launch keygen --out {directory} --workers {world_size}` (zgrad.transport.generate_keys)"
            ) from None

    secret_file = key_files(directory, rank)[1]
    public, secret = load(secret_file)
    if secret is None:
        raise ConfigError(f"CURVE key file {str(secret_file)!r} holds no secret key")
    peers = {r: load(key_files(directory, r)[0])[0] for r in range(world_size)}
    return CurveKeys(public=public, secret=secret, peers=peers)


class ZapHandler:
    """Answers ZAP requests: admits CURVE clients whose public key is on the allow-list.

    The reply's user id is the rank bound to the key; ZeroMQ attaches it to every message from
    that connection as the ``User-Id`` property, which the mesh checks against the rank the
    sender claims. Used on the mesh's I/O thread only.

    Args:
        allowed: z85 public key -> rank.
        on_denied: called with (client address, z85 key or mechanism) for each refused client.
    """

    def __init__(self, allowed: Mapping[bytes, int], on_denied: Callable[[str, str], None]):
        self._allowed = dict(allowed)
        self._on_denied = on_denied

    def handle(self, socket: zmq.Socket) -> None:
        """Read one ZAP request from the REP ``socket`` and reply. Does not block."""
        request = socket.recv_multipart(zmq.NOBLOCK)
        # Frames: version, request id, domain, address, identity, mechanism, credentials...
        version, request_id = (request + [b"", b""])[:2]
        status, user_id = b"400", b""
        if len(request) >= 7 and version == b"1.0" and request[2] == ZAP_DOMAIN and request[5] == b"CURVE":
            key = z85.encode(request[6]) if len(request[6]) == 32 else b""
            rank = self._allowed.get(key)
            if rank is not None:
                status, user_id = b"200", str(rank).encode()
            else:
                self._on_denied(request[3].decode(errors="replace"), f"unknown public key {key.decode()}")
        else:
            address = request[3].decode(errors="replace") if len(request) > 3 else "?"
            mechanism = request[5].decode(errors="replace") if len(request) > 5 else "?"
            self._on_denied(address, f"mechanism {mechanism}")
        text = b"OK" if status == b"200" else b"not on the allow-list"
        socket.send_multipart([b"1.0", request_id, status, text, user_id, b""])
