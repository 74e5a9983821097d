"""Render the pictures of ``docs/tracing.md`` to SVG, with no Graphviz: ``python docs/figures/render.py``.

* ``demo-timeline.svg`` from ``demo-pass.json`` (a ``dist_autograd.trace`` file): one row per
  thread of each worker, a bar per slice (nested slices stacked), an arrow per message.
* ``demo-graph.svg`` from ``demo-graph.dot`` (``dist_autograd.graph`` output): one column per
  worker, each node at the depth of its longest path from the top of its worker's graph, and a
  dashed arrow from every recv node to the send node it feeds on the peer.

Only the DOT this project writes (``zgrad/engine/dist/graph.py``) is parsed, not DOT in general.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from html import escape
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLORS = {"backward": "#eeeeee", "task": "#9ecae1", "node": "#3182bd", "report": "#fdae6b", "wait": "#ffffff",
          "message": "#222222"}
KIND_COLORS = {"GRAD": "#d62728", "GRAD_ACK": "#2ca02c", "DISCOVER": "#9467bd", "DISCOVER_ACK": "#8c564b",
               "START": "#e377c2", "PASS_END": "#7f7f7f", "FAILURE": "#000000"}
FONT = 'font-family="Helvetica, Arial, sans-serif"'


def _svg(width: float, height: float, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}">\n<rect width="100%" height="100%" fill="white"/>\n'
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker></defs>\n'
            + "\n".join(body) + "\n</svg>\n")


# --- the timeline ----------------------------------------------------------------------------

def timeline_svg(trace: dict, width: float = 1400.0) -> str:
    events = trace["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = sorted((e for e in events if e["ph"] == "X"), key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))
    end_us = max(e["ts"] + e["dur"] for e in slices)
    left, right, top, lane = 250.0, 20.0, 40.0, 15.0
    scale = (width - left - right) / end_us
    depth, rows = {}, defaultdict(int)
    stacks: dict[tuple, list] = defaultdict(list)
    for event in slices:
        stack = stacks[(event["pid"], event["tid"])]
        while stack and stack[-1] <= event["ts"]:
            stack.pop()
        depth[id(event)] = len(stack)
        stack.append(event["ts"] + max(event["dur"], 0.001))
        rows[(event["pid"], event["tid"])] = max(rows[(event["pid"], event["tid"])], len(stack))
    y_of, y = {}, top
    body = [f'<text x="10" y="22" font-size="14" {FONT}>one traced backward pass of the demo step '
            f'({", ".join(processes.values())}); time in ms from the first event</text>']
    for key in sorted(rows):
        y_of[key] = y
        body.append(f'<text x="10" y="{y + 11:.1f}" font-size="11" {FONT}>{escape(processes[key[0]].split(" (")[0])} · '
                    f'{escape(threads.get(key, str(key[1])))}</text>')
        body.append(f'<line x1="{left}" x2="{width - right}" y1="{y - 2:.1f}" y2="{y - 2:.1f}" stroke="#dddddd"/>')
        y += rows[key] * lane + 8
    step = _tick(end_us)
    for i in range(int(end_us // step) + 1):
        x = left + i * step * scale
        body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 6}" y2="{y}" stroke="#f0f0f0"/>')
        body.append(f'<text x="{x:.1f}" y="{top - 8}" font-size="9" text-anchor="middle" {FONT}>{i * step / 1000:g}</text>')
    centres = {}
    for event in slices:
        key = (event["pid"], event["tid"])
        x, w = left + event["ts"] * scale, max(event["dur"] * scale, 1.0)
        ey = y_of[key] + depth[id(event)] * lane
        if event["cat"] == "message":
            kind = event["name"].split()[1]
            body.append(f'<rect x="{x - 1:.1f}" y="{ey:.1f}" width="2" height="{lane - 2}" fill="{KIND_COLORS.get(kind, "#000")}"/>')
            centres[id(event)] = (x, ey + (lane - 2) / 2)
            continue
        dash = ' stroke-dasharray="3,2"' if event["cat"] == "wait" else ""
        body.append(f'<rect x="{x:.1f}" y="{ey:.1f}" width="{w:.1f}" height="{lane - 2}" fill="{COLORS.get(event["cat"], "#ccc")}" '
                    f'stroke="#888888" stroke-width="0.5"{dash}><title>{escape(event["name"])}: '
                    f'{event["dur"]:.1f} µs</title></rect>')
        if w > 7 * len(event["name"]):
            colour = "white" if event["cat"] == "node" else "black"
            body.append(f'<text x="{x + 3:.1f}" y="{ey + lane - 5:.1f}" font-size="9" fill="{colour}" {FONT}>'
                        f'{escape(event["name"])}</text>')
    flows = defaultdict(dict)
    for event in events:
        if event["ph"] in ("s", "f"):
            flows[event["id"]][event["ph"]] = event
    by_position = {(e["pid"], e["tid"], e["ts"]): id(e) for e in slices if e["cat"] == "message"}
    for flow in flows.values():
        start = centres.get(by_position.get((flow["s"]["pid"], flow["s"]["tid"], flow["s"]["ts"])))
        end = centres.get(by_position.get((flow["f"]["pid"], flow["f"]["tid"], flow["f"]["ts"])))
        if start and end:
            colour = KIND_COLORS.get(flow["s"]["name"], "#000")
            body.append(f'<line x1="{start[0]:.1f}" y1="{start[1]:.1f}" x2="{end[0]:.1f}" y2="{end[1]:.1f}" '
                        f'stroke="{colour}" stroke-width="1.2" marker-end="url(#arrow)"/>')
    legend = [(c, COLORS[c]) for c in ("backward", "task", "node", "report", "wait")] + list(KIND_COLORS.items())[:5]
    lx = left
    for name, colour in legend:
        body.append(f'<rect x="{lx:.1f}" y="{y + 10}" width="10" height="10" fill="{colour}" stroke="#888"/>'
                    f'<text x="{lx + 14:.1f}" y="{y + 19}" font-size="10" {FONT}>{name}</text>')
        lx += 24 + 6.5 * len(name)
    return _svg(width, y + 34, body)


def _tick(span_us: float) -> float:
    for step in (10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000):
        if span_us / step <= 14:
            return float(step)
    return 100000.0


# --- the graph -------------------------------------------------------------------------------

NODE = re.compile(r'^\s+(w(\d+)n\d+) \[label="((?:[^"\\]|\\.)*)", shape=(\w+)(.*)\];$')
EDGE = re.compile(r'^\s+(w\d+n\d+) -> (w\d+n\d+)(?: \[(.*)\])?;$')
CLUSTER = re.compile(r'^\s+label="([^"]*)"; style=rounded')


def parse_dot(text: str) -> tuple[list[str], dict, list]:
    clusters, nodes, edges = [], {}, []
    for line in text.splitlines():
        if (m := CLUSTER.match(line)):
            clusters.append(m.group(1))
        elif (m := NODE.match(line)):
            nodes[m.group(1)] = {"worker": int(m.group(2)), "label": m.group(3).replace("\\n", "\n"),
                                 "shape": m.group(4), "grey": "not reached" in m.group(5)}
        elif (m := EDGE.match(line)):
            edges.append((m.group(1), m.group(2), "dashed" in (m.group(3) or "")))
    return clusters, nodes, edges


def graph_svg(text: str) -> str:
    clusters, nodes, edges = parse_dot(text)
    local = defaultdict(set)
    for a, b, cross in edges:
        if not cross:
            local[a].add(b)
    depth = {name: 0 for name in nodes}
    for _ in range(len(nodes)):  # longest path from each worker's sources (the graphs are DAGs)
        for a, children in local.items():
            for b in children:
                depth[b] = max(depth[b], depth[a] + 1)
    box_h, layer_h, gap = 30.0, 62.0, 16.0
    widths = {name: 9 + 6.2 * max(len(line) for line in node["label"].split("\n")) for name, node in nodes.items()}
    position, x0, cluster_boxes = {}, 20.0, []
    for worker in sorted({n["worker"] for n in nodes.values()}):
        layers = defaultdict(list)
        for name, node in nodes.items():
            if node["worker"] == worker:
                layers[depth[name]].append(name)
        parents = defaultdict(list)
        for a, children in local.items():
            for b in children:
                parents[b].append(a)
        width = max(sum(widths[n] + gap for n in layer) for layer in layers.values()) + gap
        for d in sorted(layers):
            layer = layers[d]
            if d:
                layer.sort(key=lambda n: sum(position[p][0] for p in parents[n]) / max(1, len(parents[n])))
            x = x0 + (width - sum(widths[n] + gap for n in layer) + gap) / 2
            for name in layer:
                position[name] = (x + widths[name] / 2, 60 + d * layer_h)
                x += widths[name] + gap
        cluster_boxes.append((x0, width, max(layers) * layer_h + box_h + 50, clusters[worker] if worker < len(clusters) else ""))
        x0 += width + 60
    height = max(h for _, _, h, _ in cluster_boxes) + 75
    body = []
    for x, w, h, label in cluster_boxes:
        body.append(f'<rect x="{x:.1f}" y="25" width="{w:.1f}" height="{h:.1f}" rx="10" fill="none" stroke="#666"/>'
                    f'<text x="{x + 10:.1f}" y="43" font-size="13" {FONT}>{escape(label)}</text>')
    for a, b, cross in edges:
        (xa, ya), (xb, yb) = position[a], position[b]
        if cross:
            grey = nodes[a]["grey"]
            body.append(f'<path d="M{xa:.1f},{ya:.1f} C{(xa + xb) / 2:.1f},{ya - 60:.1f} {(xa + xb) / 2:.1f},{yb - 60:.1f} '
                        f'{xb:.1f},{yb - box_h / 2:.1f}" fill="none" stroke="{"#bbbbbb" if grey else "#1f77b4"}" '
                        f'stroke-dasharray="5,3" marker-end="url(#arrow)"/>')
        else:
            body.append(f'<line x1="{xa:.1f}" y1="{ya + box_h / 2:.1f}" x2="{xb:.1f}" y2="{yb - box_h / 2:.1f}" '
                        f'stroke="#555" marker-end="url(#arrow)"/>')
    for name, node in nodes.items():
        x, y = position[name]
        w = widths[name]
        fill, ink = ("#dddddd", "#888888") if node["grey"] else (
            {"house": "#fde0c5", "invhouse": "#c7e9c0", "ellipse": "#f7f7f7"}.get(node["shape"], "#ffffff"), "#000000")
        rx = box_h / 2 if node["shape"] == "ellipse" else 5
        body.append(f'<rect x="{x - w / 2:.1f}" y="{y - box_h / 2:.1f}" width="{w:.1f}" height="{box_h}" rx="{rx}" '
                    f'fill="{fill}" stroke="{ink}"/>')
        lines = node["label"].split("\n")
        for i, line in enumerate(lines):
            body.append(f'<text x="{x:.1f}" y="{y + 4 + (i - (len(lines) - 1) / 2) * 11:.1f}" font-size="10" '
                        f'text-anchor="middle" fill="{ink}" {FONT}>{escape(line)}</text>')
    body.append(f'<text x="20" y="{height - 26:.0f}" font-size="11" {FONT}>solid: gradients inside a worker; dashed: '
                'a recv node sends its gradients to the matching send node (GRAD)</text>')
    body.append(f'<text x="20" y="{height - 10:.0f}" font-size="11" {FONT}>green: send nodes; orange: recv nodes; '
                'grey: not reached by SMART discovery (an RPC result the roots do not use)</text>')
    return _svg(x0, height, body)


def main() -> int:
    (HERE / "demo-timeline.svg").write_text(timeline_svg(json.loads((HERE / "demo-pass.json").read_text())))
    (HERE / "demo-graph.svg").write_text(graph_svg((HERE / "demo-graph.dot").read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
