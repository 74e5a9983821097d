"""A third-party transport for the tests: tcp on loopback, published as ``test-tcp``.

It is found through its entry point (``zgrad_test_transport-0.1.0.dist-info/entry_points.txt``
beside this package), exactly as an installed plugin would be; the tests only put this
directory on ``sys.path``. It records the endpoints it binds so a test can see it was used.
"""

from __future__ import annotations

from zgrad.transport import EndpointRequest, TcpTransport

__all__ = ["LoopbackTestTransport", "NOT_A_TRANSPORT"]


class LoopbackTestTransport(TcpTransport):
    """tcp, always on 127.0.0.1, remembering every endpoint it bound."""

    name = "test-tcp"

    def __init__(self) -> None:
        super().__init__()
        self.bound: list[str] = []

    def bind_endpoint(self, request: EndpointRequest) -> str:
        endpoint = super().bind_endpoint(request).replace(request.config.transport.bind_address, "127.0.0.1", 1)
        self.bound.append(endpoint)
        return endpoint


NOT_A_TRANSPORT = object()
