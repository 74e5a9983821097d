"""A worker process for the dead-worker tests: joins the job, serves calls, waits to be killed."""

from __future__ import annotations

import json
import sys
import time

from zgrad.distributed import rpc

if __name__ == "__main__":
    config = json.loads(sys.argv[1])
    rpc.init_rpc("worker1", rank=1, world_size=2, config=config)
    print("ready", flush=True)
    time.sleep(120)  # the test kills this process long before
