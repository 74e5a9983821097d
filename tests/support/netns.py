"""Two hosts on one machine for the tests: network namespaces joined by a veth pair."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

__all__ = ["two_hosts"]


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)


@pytest.fixture
def two_hosts():
    """Two network namespaces joined by a veth pair, 10.214.x.1 and 10.214.x.2; removed afterwards."""
    if shutil.which("ip") is None:
        pytest.skip("the ip command is not available")
    tag = uuid.uuid4().hex[:6]
    names = [f"zg{tag}a", f"zg{tag}b"]
    subnet = 16 + int(tag[:2], 16) % 200
    addresses = [f"10.214.{subnet}.1", f"10.214.{subnet}.2"]
    made = []
    try:
        for name in names:
            if _ip("netns", "add", name).returncode != 0:
                pytest.skip("network namespaces cannot be made here (ip netns add not permitted)")
            made.append(name)
            _ip("-n", name, "link", "set", "lo", "up")
        veth = [f"v{tag}a", f"v{tag}b"]
        steps = [("link", "add", veth[0], "netns", names[0], "type", "veth", "peer", "name", veth[1], "netns", names[1])]
        for name, dev, address in zip(names, veth, addresses):
            steps += [("-n", name, "addr", "add", f"{address}/24", "dev", dev), ("-n", name, "link", "set", dev, "up")]
        for step in steps:
            done = _ip(*step)
            if done.returncode != 0:
                pytest.skip(f"cannot set up the veth pair: ip {' '.join(step)}: {done.stderr.strip()}")
        yield names, addresses
    finally:
        for name in made:
            _ip("netns", "del", name)
