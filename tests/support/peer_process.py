"""A mesh worker in its own process, for the liveness and CMA tests (killed or stopped by them).

    python peer_process.py RANK WORLD_SIZE MASTER_PORT JOB_NAME [TRANSPORT_JSON]

Joins the tcp mesh whose rank 0 listens on 127.0.0.1:MASTER_PORT with short heartbeats (the
optional JSON object overrides ``[transport]`` keys, e.g. ``{"kind": "ipc", "ipc_dir": ...}``),
prints READY, echoes every message of kind 1 back to its sender, answers kind 2 with its
``mesh.stats()`` as metadata, and exits when rank 0 goes or after 60 s at the latest. Its
handler never calls ``mesh.role.allow_takeover()``, so it is never taken over: the echoes leave in
the order the messages arrived (docs/transport.md, Order).
"""

from __future__ import annotations

import json
import sys
import threading

from zgrad.config import parse_config
from zgrad.transport import create_mesh


def main() -> None:
    rank, world_size, master_port, job = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    overrides = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    config = parse_config({"job": {"name": job}, "transport": {
        "kind": "tcp", "connect_timeout_s": 20.0, "heartbeat_interval_s": 0.1, "heartbeat_timeout_s": 1.0, **overrides}})
    box = {}
    done = threading.Event()

    def echo(env) -> None:
        if env.kind == 2:
            box["mesh"].send(env.src, 2, env.request_id, box["mesh"].stats())
        else:
            box["mesh"].send(env.src, env.kind, env.request_id, env.meta, env.buffers)

    mesh = create_mesh(config, rank, world_size, f"peer{rank}", on_message=echo,
                       on_peer_lost=lambda r, why: done.set() if r == 0 else None, valid_kinds={1, 2},
                       master_addr="127.0.0.1", master_port=master_port)
    box["mesh"] = mesh
    mesh.start()
    print("READY", flush=True)
    done.wait(60)
    mesh.close(timeout_s=1.0)


if __name__ == "__main__":
    main()
