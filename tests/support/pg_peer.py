"""A rank in a process of its own, for the tests that kill one (see ``pg_harness.rank_process``).

    python pg_peer.py CONFIG_JSON RANK WORLD_SIZE PORT

It joins the process group, prints "ready", runs one all_reduce with the others, then sleeps
until it is killed.
"""

from __future__ import annotations

import json
import sys
import time

import zgrad
import zgrad.distributed as dist

if __name__ == "__main__":
    print("imported", flush=True)
    config = json.loads(sys.argv[1])
    rank, world_size, port = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size, config=config)
    print("ready", flush=True)
    dist.all_reduce(zgrad.ones(4))
    time.sleep(120)  # the test kills this process long before
