"""The distributed graph of an autograd context, as plain values and as DOT.

Each worker describes its share (:func:`describe_context`): the nodes reachable from where its
last pass as root started and from the context's send and recv functions, with their edges; a
send or recv node carries its ``autograd_message_id`` and peer. :func:`to_dot` joins the shares:
one cluster per worker, and an edge from every recv node to the matching send node on its peer
(the way its gradients travel). Nodes that SMART discovery did not reach in the context's last
pass (an RPC result the roots do not use) are grey.
"""

from __future__ import annotations

from typing import Any, Iterable

from zgrad.engine.dist.context import DistAutogradContext
from zgrad.engine.graph import AccumulateGrad, Node
from zgrad.engine.send_recv import RecvNode, SendNode

__all__ = ["describe_context", "to_dot"]


def _walk(starts: Iterable[Node]) -> list[Node]:
    """Every node reachable from ``starts``, each once, in the order first met."""
    seen: dict[Node, None] = {}
    stack = [n for n in reversed(list(starts))]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen[node] = None
        stack.extend(edge.node for edge in reversed(node.next_edges) if edge is not None and edge.node not in seen)
    return list(seen)


def describe_context(ctx: DistAutogradContext, rank: int, worker: str) -> dict[str, Any]:
    """This worker's share of the context's graph, as plain values (for the RPC codec)."""
    with ctx.lock:
        starts = [*ctx.root_nodes, *ctx.send_functions.values(), *ctx.recv_functions.values()]
        known_workers = sorted(ctx.known_workers)
    selection = ctx.last_selection
    nodes = _walk(starts)
    ids = {node: i for i, node in enumerate(nodes)}
    described = []
    for node in nodes:
        entry: dict[str, Any] = {"id": ids[node], "name": node.name,
                                 "reached": selection is None or selection.reached(node)}
        if isinstance(node, (SendNode, RecvNode)):
            entry.update(kind="send" if isinstance(node, SendNode) else "recv", message=node.autograd_message_id,
                         peer=node.peer)
        else:
            entry["kind"] = "leaf" if isinstance(node, AccumulateGrad) else "node"
        described.append(entry)
    edges = [[ids[node], ids[edge.node]] for node in nodes for edge in node.next_edges if edge is not None]
    return {"rank": rank, "worker": worker, "nodes": described, "edges": edges, "known_workers": known_workers}


_SHAPES = {"send": "invhouse", "recv": "house", "leaf": "ellipse", "node": "box"}


def _quote(text: str) -> str:
    """``text`` as a quoted DOT string (a line break becomes DOT's escape for one)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def to_dot(context_id: int, shares: list[dict[str, Any]]) -> str:
    """DOT text of the graph whose shares (:func:`describe_context`) are given, one per worker."""
    lines = [f"digraph {_quote(f'autograd context {context_id}')} {{",
             "  rankdir=TB;",
             '  node [fontname="Helvetica", fontsize=10, style="rounded,filled", fillcolor="white"];',
             '  edge [fontname="Helvetica", fontsize=9];']
    sends: dict[tuple[int, int], str] = {}
    names = {share["rank"]: share["worker"] for share in shares}
    for share in sorted(shares, key=lambda s: s["rank"]):
        rank = share["rank"]
        lines.append(f"  subgraph cluster_{rank} {{")
        cluster_label = _quote(f"{share['worker']} (rank {rank})")
        lines.append(f"    label={cluster_label}; style=rounded; color=grey40;")
        for node in share["nodes"]:
            name = f"w{rank}n{node['id']}"
            label = node["name"]
            if node["kind"] in ("send", "recv"):
                peer = names.get(node["peer"], f"rank {node['peer']}")
                label += f"\n{node['message']:#x} {'→' if node['kind'] == 'recv' else '←'} {peer}"
                if node["kind"] == "send":
                    sends[(rank, node["message"])] = name
            attributes = f"shape={_SHAPES[node['kind']]}"
            if not node["reached"]:
                attributes += ', fillcolor="lightgrey", fontcolor="grey45", color="grey60", tooltip="not reached by SMART discovery"'
            lines.append(f"    {name} [label={_quote(label)}, {attributes}];")
        lines.append("  }")
    for share in shares:
        rank = share["rank"]
        for src, dst in share["edges"]:
            lines.append(f"  w{rank}n{src} -> w{rank}n{dst};")
    for share in shares:
        rank = share["rank"]
        for node in share["nodes"]:
            target = sends.get((node.get("peer"), node.get("message"))) if node["kind"] == "recv" else None
            if target is not None:
                color = "blue" if node["reached"] else "grey60"
                lines.append(f'  w{rank}n{node["id"]} -> {target} [style=dashed, color={color}, label="GRAD", '
                             "constraint=false];")
    lines.append("}")
    return "\n".join(lines) + "\n"
