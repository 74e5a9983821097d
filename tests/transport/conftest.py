"""Fixtures for the transport tests; a test fails if a mesh I/O thread outlives it."""

from __future__ import annotations

import shutil
import tempfile
import threading

import pytest
from transport_world import TRANSPORTS, WorldFactory


@pytest.fixture
def short_tmp():
    """A short temporary directory (Unix socket paths are limited to 107 bytes)."""
    path = tempfile.mkdtemp(prefix="zgt")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def worlds(short_tmp):
    factory = WorldFactory(short_tmp)
    yield factory
    factory.close_all()


@pytest.fixture(params=TRANSPORTS)
def transport(request) -> str:
    return request.param


@pytest.fixture(autouse=True)
def no_leftover_io_threads():
    yield
    leftover = [t.name for t in threading.enumerate() if t.name.startswith("zgrad-mesh-io")]
    assert not leftover, f"mesh I/O threads still running after the test: {leftover}"
