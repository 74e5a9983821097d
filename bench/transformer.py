"""Transformer benchmark: zgrad against torch, in the same run, alternating, by section.

Sections (``--section NAME``; all of them without it):

- ``sdpa``: ``F.scaled_dot_product_attention`` causal, batch 8, 8 heads, head dim 64,
  T = 256, 512, 1024, forward + backward, float32; target <= 1.0x torch's time. Also the peak
  memory of one forward + backward (see below); target <= torch's.
- ``mingpt``: one training step of pytorch/examples' minGPT (``tests/support/mingpt.py``: 4
  layers, 4 heads, 256 wide, block 128, batch 16, a 65-character vocabulary, dropout 0): forward,
  backward, ``clip_grad_norm_``, AdamW; float32 (target <= 1.0x torch's time), and the same step
  under bfloat16 autocast (both libraries; reported, no target).
- ``mingpt-ddp``: the same float32 step with the model wrapped in ``DistributedDataParallel`` on
  2 ranks, batch 16 per rank, one process per rank with one compute thread (zgrad's DDP over its
  process group against torch's over gloo, both on loopback); target <= 1.0x torch's time. Also
  the same step without DDP on both ranks at once (the limit), and DDP's overhead (the
  difference). Both libraries' worlds are up together, and blocks of steps alternate between
  them, the waiting world stopped (:class:`_procs.ServedWorld`); rank 0's times, after barriers.

The sdpa and mingpt sections run each library in its own interpreter per thread count (1 and 2):
Numba and torch read their thread counts once (``NUMBA_NUM_THREADS``, ``torch.set_num_threads``),
and in one process torch's OpenMP threads spin after its steps on the cores zgrad needs. Single
steps alternate between the two, the waiting one stopped (:func:`_procs.alternating_rounds`);
times are medians, the ratio is zgrad's median / torch's.

Peak memory: each library runs one forward + backward in its own fresh interpreter after a warm-up
on a small input of the same dtype and thread count (which compiles the kernels and loads
torch's); the figure is the growth of the process's peak resident set (``ru_maxrss``) over that
step, so it counts everything the step allocated and touched (numpy and Numba's own allocations,
torch's allocator) and nothing the inputs or libraries held before. Other processes do not change
it, unlike the times: on a shared machine the times are noisy (the load average is printed).

Usage: python bench/transformer.py [--section sdpa|mingpt|mingpt-ddp] [--quick] [--out bench/results/transformer.json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pathlib
import platform
import resource
import statistics
import subprocess
import sys
from collections.abc import Callable

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import _procs  # noqa: E402
from kernels import (  # noqa: E402
    FULL, QUICK, Settings, blas_description, run_with_bounded_spin, thread_environment,
)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "support"))
from mingpt import GPTConfig, create_optimizer, gpt_classes  # noqa: E402 - the model the tests compare with torch

TIME_TARGET = 1.0
MEMORY_TARGET = 1.0
THREAD_COUNTS = (1, 2)

SDPA_BATCH, SDPA_HEADS, SDPA_HEAD_DIM = 8, 8, 64
SDPA_LENGTHS = (256, 512, 1024)


def _sdpa_step(lib, length: int, seed: int = 0) -> Callable[[], None]:
    """Causal attention forward + backward of one library on (8, 8, length, 64) float32 inputs."""
    rng = np.random.default_rng(seed)
    shape = (SDPA_BATCH, SDPA_HEADS, length, SDPA_HEAD_DIM)
    q, k, v = (lib.tensor(rng.standard_normal(shape, dtype=np.float32), requires_grad=True) for _ in range(3))
    upstream = lib.tensor(rng.standard_normal(shape, dtype=np.float32))

    def step() -> None:
        for t in (q, k, v):
            t.grad = None
        lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).backward(upstream)

    return step


MINGPT = GPTConfig(n_layer=4, n_head=4, n_embd=256, vocab_size=65, block_size=128)
MINGPT_BATCH = 16


def _mingpt_step(lib, autocast: bool, seed: int = 0, wrap: Callable = lambda model: model) -> Callable[[], None]:
    """One minGPT training step (forward, backward, clip to norm 1, AdamW) of one library, float32
    weights, the forward under bfloat16 autocast when ``autocast``; the model is ``wrap(GPT)``
    (e.g. ``DistributedDataParallel``), its weights and batch drawn from ``seed``."""
    lib.manual_seed(seed)
    model = wrap(gpt_classes(lib).GPT(MINGPT, lib.float32))
    optimizer = create_optimizer(lib, model, learning_rate=3e-4)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, MINGPT.vocab_size, size=(MINGPT_BATCH, MINGPT.block_size + 1))
    inputs, targets = lib.tensor(tokens[:, :-1]), lib.tensor(tokens[:, 1:])

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with lib.autocast("cpu", dtype=lib.bfloat16, enabled=autocast):
            _, loss = model(inputs, targets)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    return step


def mingpt_steps(lib, settings: Settings) -> dict[str, Callable[[], None]]:
    """The mingpt section's steps of one library: float32, and under bfloat16 autocast."""
    return {"float32": _mingpt_step(lib, False), "bf16": _mingpt_step(lib, True)}


def mingpt_times(settings: Settings, threads: int) -> list[dict]:
    """Rows of zgrad's and torch's median step times, alternating, in float32 and under bfloat16 autocast."""
    rows = []
    for key, times in served_times("mingpt", settings, threads).items():
        autocast = key == "bf16"
        rows.append({"section": "mingpt", "name": "minGPT train step" + (" bf16 autocast" if autocast else ""),
                     "size": "4L 4H 256w T128 B16", "threads": threads,
                     "zgrad_ms": 1e3 * statistics.median(times["zgrad"]),
                     "torch_ms": 1e3 * statistics.median(times["torch"]),
                     "zgrad_best_ms": 1e3 * min(times["zgrad"]), "target": None if autocast else TIME_TARGET})
    return rows


def mingpt_section(settings: Settings) -> list[dict]:
    """Step times of the mingpt section at each thread count."""
    return [row for threads in THREAD_COUNTS for row in mingpt_times(settings, threads)]


MINGPT_DDP_RANKS = 2
MINGPT_DDP_WARMUP_TIMEOUT_S = 600.0  # the first steps compile zgrad's kernels
MINGPT_DDP_BLOCK_TIMEOUT_S = 300.0
_MINGPT_DDP_RUNS = ("ddp", "local")


def mingpt_ddp_rank(framework: str, rank: int, spec: dict) -> None:
    """Serve one rank of a :class:`_procs.ServedWorld` (every rank commanded): the minGPT step
    under ``DistributedDataParallel`` (``"ddp"``) and without it (``"local"``), both with this
    rank's own weights and batch; each command ``{"run": ..., "iters": n}`` runs n steps after a
    barrier and answers their times. Blocks until told to exit, then destroys the process group."""
    lib = importlib.import_module(framework)
    dist = importlib.import_module(f"{framework}.distributed")
    init_method = f"tcp://127.0.0.1:{spec['port']}"
    if framework == "zgrad":
        dist.init_process_group("zmq", init_method=init_method, rank=rank, world_size=spec["world_size"],
                                config={"transport": spec["config"]["transport"]})
    else:
        lib.set_num_threads(1)
        dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=spec["world_size"])
    try:
        ddp = importlib.import_module(f"{framework}.nn.parallel").DistributedDataParallel
        steps = {"ddp": _mingpt_step(lib, False, seed=rank, wrap=ddp), "local": _mingpt_step(lib, False, seed=rank)}

        def handle(command: dict) -> dict:
            dist.barrier()
            return {"times": _procs.timed_calls(steps[command["run"]], command["iters"])}

        _procs.serve(handle)
    finally:
        dist.destroy_process_group()


def mingpt_ddp_section(settings: Settings) -> list[dict]:
    """Rows of the minGPT step under DDP on 2 ranks, without DDP on both ranks at once, and DDP's
    overhead: zgrad's and torch's medians of rank 0's step times, in alternating blocks."""
    frameworks = ("zgrad", "torch")
    times = {framework: {run: [] for run in _MINGPT_DDP_RUNS} for framework in frameworks}
    worlds: dict[str, _procs.ServedWorld] = {}
    try:
        for framework in frameworks:
            worlds[framework] = _procs.ServedWorld(__file__, framework, {}, MINGPT_DDP_RANKS, every_rank=True)
        for framework, world in worlds.items():  # one more than settings.warmup: torch's DDP rebuilds its buckets
            _procs.activate(worlds, framework)
            for run in _MINGPT_DDP_RUNS:
                world.ask({"run": run, "iters": settings.warmup + 1}, MINGPT_DDP_WARMUP_TIMEOUT_S)
        # Blocks of one step of each run, the finest alternation; an even number of them, so that
        # each library goes first as often as the other.
        for block in range(settings.repeats + settings.repeats % 2):
            for framework in frameworks if block % 2 == 0 else frameworks[::-1]:
                _procs.activate(worlds, framework)
                for run in _MINGPT_DDP_RUNS:
                    answer = worlds[framework].ask({"run": run, "iters": 1}, MINGPT_DDP_BLOCK_TIMEOUT_S)
                    times[framework][run] += answer["times"]
    finally:
        for world in worlds.values():
            world.close()
    return _mingpt_ddp_rows(times)


def _mingpt_ddp_rows(times: dict[str, dict[str, list[float]]]) -> list[dict]:
    """The section's rows from library -> run -> rank 0's step times (s): the DDP step, the step
    without DDP, and the difference of their medians."""
    row = {"section": "mingpt-ddp", "size": f"4L 4H 256w T128 B{MINGPT_BATCH} x{MINGPT_DDP_RANKS} ranks",
           "threads": 1}
    ddp, local = ({**row, "name": name, "target": target,
                   **{f"{library}_ms": 1e3 * statistics.median(times[library][run]) for library in times},
                   "zgrad_best_ms": 1e3 * min(times["zgrad"][run]),
                   **{f"{library}_samples_ms": [1e3 * t for t in times[library][run]] for library in times}}
                  for run, name, target in (("ddp", "minGPT train step DDP", TIME_TARGET),
                                            ("local", "minGPT train step, no DDP", None)))
    overhead = {**row, "name": "DDP overhead (difference)", "target": None, "zgrad_best_ms": None,
                **{f"{library}_ms": ddp[f"{library}_ms"] - local[f"{library}_ms"] for library in times}}
    return [ddp, local, overhead]


def _libraries():
    return {name: importlib.import_module(name) for name in ("zgrad", "torch")}


def sdpa_steps(lib, settings: Settings) -> dict[str, Callable[[], None]]:
    """The sdpa section's steps of one library, by sequence length."""
    lengths = SDPA_LENGTHS[:1] if settings is QUICK else SDPA_LENGTHS
    return {str(length): _sdpa_step(lib, length) for length in lengths}


def sdpa_times(settings: Settings, threads: int) -> list[dict]:
    """Rows of zgrad's and torch's median times, alternating, at each sequence length."""
    return [{"section": "sdpa", "name": "SDPA causal fwd+bwd", "size": f"8x8x{length}x64 float32",
             "threads": threads, "zgrad_ms": 1e3 * statistics.median(times["zgrad"]),
             "torch_ms": 1e3 * statistics.median(times["torch"]), "zgrad_best_ms": 1e3 * min(times["zgrad"]),
             "target": TIME_TARGET}
            for length, times in served_times("sdpa", settings, threads).items()]


TIMED_STEPS: dict[str, Callable[[object, Settings], dict[str, Callable[[], None]]]] = {
    "sdpa": sdpa_steps, "mingpt": mingpt_steps}
STEP_TIMEOUT_S = 900.0  # a step's first calls compile its kernels


def serve_steps(library: str, spec: dict) -> None:
    """A served library of :func:`served_times`: build ``spec["section"]``'s steps and time the
    ones asked for (:func:`_procs.serve_timed`)."""
    lib = importlib.import_module(library)
    if library == "torch":
        lib.set_num_threads(spec["threads"])
    settings = QUICK if spec["quick"] else FULL
    steps = TIMED_STEPS[spec["section"]](lib, settings)
    _procs.serve_timed(steps, settings.warmup, {"keys": list(steps)})


def served_times(section: str, settings: Settings, threads: int) -> dict[str, dict[str, list[float]]]:
    """Step key -> library -> times of ``section``'s steps: zgrad and torch each in its own
    interpreter with ``threads`` threads, alternating single steps while the other is stopped
    (in one process, torch's OpenMP threads spin after its steps on the cores zgrad needs, and
    zgrad takes the workqueue layer where torch's libgomp is loaded)."""
    spec = {"section": section, "threads": threads, "quick": settings is QUICK}
    worlds: dict[str, _procs.ServedWorld] = {}
    try:
        for library in ("zgrad", "torch"):
            worlds[library] = _procs.ServedWorld(__file__, library, spec, 1, env=thread_environment(threads))
        _procs.activate(worlds, "zgrad")
        keys = worlds["zgrad"].ask({"describe": True}, STEP_TIMEOUT_S)["keys"]
        return {key: _procs.alternating_rounds(worlds, {library: {"call": key} for library in worlds}, settings.repeats,
                                               settings.min_sampling_s, 1, STEP_TIMEOUT_S)
                for key in keys}
    finally:
        for world in worlds.values():
            world.close()


def sdpa_peak_memory(library: str, length: int, threads: int) -> float:
    """MiB the peak resident set grows by over one forward + backward (run in a fresh process)."""
    lib = _libraries()[library]
    if library == "torch":
        lib.set_num_threads(threads)
    _sdpa_step(lib, 128)()  # compiles (and picks the parallel variant as the real step does)
    step = _sdpa_step(lib, length)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024.0


def _run_json(args: list[str], threads: int) -> object:
    done = subprocess.run([sys.executable, __file__, *args], env=thread_environment(threads), capture_output=True,
                          text=True)
    if done.returncode:
        raise RuntimeError(f"bench/transformer.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def sdpa_section(settings: Settings) -> list[dict]:
    """Times and peak memory of the sdpa section at each thread count."""
    rows = []
    for threads in THREAD_COUNTS:
        for row in sdpa_times(settings, threads):
            length = int(row["size"].split("x")[2])
            row["zgrad_peak_mib"], row["torch_peak_mib"] = (
                _run_json(["--memory", library, "--length", str(length), "--threads", str(threads)], threads)
                for library in ("zgrad", "torch"))
            rows.append(row)
    return rows


SECTIONS: dict[str, Callable[[Settings], list[dict]]] = {"sdpa": sdpa_section, "mingpt": mingpt_section,
                                                         "mingpt-ddp": mingpt_ddp_section}


def format_table(rows: list[dict]) -> str:
    header = ("name", "size", "threads", "zgrad ms", "torch ms", "time ratio", "zgrad MiB", "torch MiB",
              "memory ratio", "pass")
    lines = []
    for r in rows:
        time_ratio = r["zgrad_ms"] / r["torch_ms"]
        memory = "zgrad_peak_mib" in r
        memory_ratio = r["zgrad_peak_mib"] / max(r["torch_peak_mib"], 1e-9) if memory else None
        passed = time_ratio <= r["target"] and (memory_ratio is None or memory_ratio <= MEMORY_TARGET) \
            if r["target"] is not None else None
        lines.append((r["name"], r["size"], str(r["threads"]), f"{r['zgrad_ms']:.1f}", f"{r['torch_ms']:.1f}",
                      f"{time_ratio:.2f}x", f"{r['zgrad_peak_mib']:.1f}" if memory else "-",
                      f"{r['torch_peak_mib']:.1f}" if memory else "-", f"{memory_ratio:.2f}x" if memory else "-",
                      {True: "PASS", False: "fail", None: "report"}[passed]))
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), fmt.format(*("-" * w for w in widths)), *(fmt.format(*ln) for ln in lines)])


def main(argv: list[str] | None = None) -> int:
    parser = _procs.bench_args(__doc__.split("\n\n")[0])
    parser.add_argument("--section", choices=sorted(SECTIONS), help="only this section")
    parser.add_argument("--out", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parent / "results" / "transformer.json")
    parser.add_argument("--memory", choices=("zgrad", "torch"), help=argparse.SUPPRESS)
    parser.add_argument("--length", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if argv is None:
        run_with_bounded_spin()
    settings = QUICK if args.quick else FULL
    if args.spec:  # --worker names the library: a served library of a timed section, or a mingpt-ddp rank
        spec = json.loads(args.spec)
        if "section" in spec:
            serve_steps(args.worker, spec)
        else:
            mingpt_ddp_rank(args.worker, args.rank, spec)
        return 0
    if args.memory:
        print(json.dumps(sdpa_peak_memory(args.memory, args.length, args.threads)))
        return 0
    load_before = os.getloadavg()[0]
    rows = [row for name in ([args.section] if args.section else SECTIONS) for row in SECTIONS[name](settings)]
    load_after = os.getloadavg()[0]
    print(format_table(rows))
    print(f"\nload average (1 min): {load_before:.2f} before, {load_after:.2f} after, on {os.cpu_count()} cpus")
    print(f"numpy's BLAS: {blas_description()}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "numpy": np.__version__,
                    "blas": blas_description(),
                    "load_average_1min": {"before": load_before, "after": load_after}},
        "rows": rows,
    }, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
