"""A worker process for the dead-worker tests: joins the job, serves calls, waits to be killed.

    python rpc_peer.py CONFIG_JSON [RANK WORLD_SIZE]   (default: rank 1 of 2)
"""

from __future__ import annotations

import json
import sys
import time

import rpc_targets  # noqa: F401 - imported before the job starts (rpc_harness.child_worker)
from zgrad.distributed import rpc

if __name__ == "__main__":
    print("imported", flush=True)
    config = json.loads(sys.argv[1])
    rank, world_size = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (1, 2)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size, config=config)
    print("ready", flush=True)
    time.sleep(120)  # the test kills this process long before
