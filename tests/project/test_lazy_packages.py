"""``import zgrad`` loads none of the distributed layer, and its packages are still there on first
use as in PyTorch: ``zgrad.distributed``, ``zgrad.multiprocessing`` and ``zgrad.nn.parallel``."""

from __future__ import annotations

import json
import subprocess
import sys

_PROBE = """
import json, sys
import zgrad
loaded_by_import = sorted(m for m in sys.modules if m.startswith(("zgrad.distributed", "zgrad.nn.parallel")))
listed = ["distributed" in dir(zgrad), "multiprocessing" in dir(zgrad), "parallel" in dir(zgrad.nn)]
found = {
    "ddp": zgrad.nn.parallel.DistributedDataParallel.__name__,
    "available": zgrad.distributed.is_available(),
    "initialized": zgrad.distributed.is_initialized(),
    "spawn": callable(zgrad.multiprocessing.spawn),
}
missing = []
for owner, name in ((zgrad, "no_such_thing"), (zgrad.nn, "no_such_layer")):
    try:
        getattr(owner, name)
    except AttributeError as exc:
        missing.append(str(exc))
print(json.dumps({"loaded_by_import": loaded_by_import, "listed": listed, "found": found, "missing": missing}))
"""


def test_the_distributed_packages_load_on_first_use():
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["loaded_by_import"] == [] and result["listed"] == [True, True, True]
    assert result["found"] == {"ddp": "DistributedDataParallel", "available": True, "initialized": False, "spawn": True}
    assert result["missing"] == ["module 'zgrad' has no attribute 'no_such_thing'",
                                 "module 'zgrad.nn' has no attribute 'no_such_layer'"]
