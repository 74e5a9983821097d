"""``dist_autograd.graph(context_id)``: the distributed graph of a context, as DOT text."""

from __future__ import annotations

from typing import Any

from zgrad.distributed.autograd.worker import current_worker
from zgrad.engine.dist.graph import describe_context, to_dot
from zgrad.errors import AutogradError

__all__ = ["graph", "describe_graph"]


def graph(context_id: int) -> str:
    """The graph of autograd context ``context_id`` on every worker it reached, as DOT text.

    One cluster per worker; the recv node of each RPC points to the matching send node on its
    peer (the way gradients travel); nodes that SMART discovery did not reach in the context's
    last pass are grey. Call it before the context exits (its other workers release it then).
    Blocks while it asks each worker the context reached for its share (one RPC each); render
    the text with Graphviz (``dot -Tsvg``).

    Raises:
        AutogradError: "Could not find autograd context with id: N".
    """
    worker = current_worker()
    agent = worker.agent
    shares = {agent.rank: describe_context(worker.contexts.get(context_id), agent.rank, agent.name)}
    pending = set(shares[agent.rank]["known_workers"]) - {agent.rank}
    while pending:
        rank = pending.pop()
        share = agent.caller.call(rank, describe_graph, args=(context_id,)).wait()
        if share is None:
            continue  # released there already
        shares[rank] = share
        pending |= set(share["known_workers"]) - set(shares)
    return to_dot(context_id, list(shares.values()))


def describe_graph(context_id: int) -> dict[str, Any] | None:
    """This worker's share of the graph of ``context_id``, or None if it does not hold the
    context (the RPC target :func:`graph` calls)."""
    worker = current_worker()
    try:
        ctx = worker.contexts.get(context_id)
    except AutogradError:
        return None
    return describe_context(ctx, worker.agent.rank, worker.agent.name)
