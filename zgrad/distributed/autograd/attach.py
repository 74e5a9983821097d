"""Giving an RPC agent its distributed autograd: ``init_rpc`` calls :func:`attach`."""

from __future__ import annotations

from pathlib import Path

from zgrad.distributed.autograd.tracing import trace_job
from zgrad.distributed.autograd.worker import AutogradAgent, DistAutogradWorker

__all__ = ["attach"]


def attach(agent: AutogradAgent) -> DistAutogradWorker:
    """Give ``agent`` its distributed autograd (before the agent starts receiving); with
    ``[engine] trace = true``, it records the passes this worker roots for the whole job."""
    worker = DistAutogradWorker(agent)
    engine = agent.config.engine
    if engine.trace:
        trace_job(worker, Path(engine.trace_file.format(worker=agent.name)))
    return worker
