"""``python -m tests.conformance --table``: run every cell of the conformance table against
PyTorch and print the coverage table, one line per row and one column per dtype of the grid:
✓ agrees with torch, R refused as torch refuses, ✗ differs (the details follow the table with
``--details``), · not in the row. Needs torch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "support"))

from conformance_cells import run_cell, torch  # noqa: E402
from conformance_table import rows  # noqa: E402
from row import ALL_DTYPES  # noqa: E402

MARKS = {"ok": "✓", "refused": "R", "fail": "✗"}
SHORT = {"bool": "b", "uint8": "u8", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
         "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance", description=__doc__)
    parser.add_argument("--table", action="store_true", help="print the coverage table (the default action)")
    parser.add_argument("--op", default="", help="only rows whose op starts with this")
    parser.add_argument("--device", default="cpu", help="zgrad's device (torch runs on the CPU)")
    parser.add_argument("--details", action="store_true", help="after the table, why each ✗ cell differs")
    args = parser.parse_args(argv)
    if torch is None:
        print("the conformance table compares with PyTorch: pip install torch", file=sys.stderr)
        return 2
    chosen = [r for r in rows() if r.op.startswith(args.op)]
    width = max(len(r.id) for r in chosen)
    print(f"{'op':<{width}}  " + " ".join(f"{SHORT[d]:>4}" for d in ALL_DTYPES))
    counts = {"ok": 0, "refused": 0, "fail": 0}
    failures = []
    for row in chosen:
        marks = []
        for dtype in ALL_DTYPES:
            if dtype not in row.dtypes:
                marks.append("·")
                continue
            verdict = run_cell(row, dtype, args.device)
            counts[verdict.status] += 1
            marks.append(MARKS[verdict.status])
            if verdict.status == "fail":
                failures.append(f"{row.id} [{dtype}]: {verdict.detail}")
        print(f"{row.id:<{width}}  " + " ".join(f"{m:>4}" for m in marks))
    total = sum(counts.values())
    print(f"\n{len(chosen)} rows, {total} cells: {counts['ok']} ✓, {counts['refused']} refused as torch, "
          f"{counts['fail']} ✗")
    if args.details:
        print("\n".join(["", *failures]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
