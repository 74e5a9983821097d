#!/bin/sh
# Remakes the pictures of docs/tracing.md from a real run of the demo's training step:
# two workers over tcp (configs/cluster.toml), the last step traced, then rendered to SVG by
# render.py (Graphviz is not needed). Run from the repository root.
set -e
python -m zgrad.launch.cli --config configs/cluster.toml -- docs/figures/demo_trace_job.py smart
python docs/figures/render.py
python -m zgrad.launch.cli trace docs/figures/demo-pass.json > docs/figures/demo-summary.txt
