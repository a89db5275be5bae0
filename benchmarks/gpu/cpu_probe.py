"""How fast the host's vCPUs run Python right now: a fixed interpreter-bound workload, timed every ``interval`` s.

Session 25 (``benchmarks/results/gpu_session25_2026-11-29.md``): SGLang's decode rate, with the same batch, weights
and tokens every time, moved between two levels from one generation to the next (about 50k and 80k tokens/s on the
scheduler's decode lines), in setups that never release memory as much as in those that do, while the scheduler's
thread ran at about 0.95 of a core in both and the GPU's SM use fell with the rate (about 70-80% at the fast level,
50-56% at the slow one): the GPU waited for the host. Whether the host's cores as a whole ran slower during the slow
generations (the VM's share of its physical cores, their clocks: nothing this library sets), or only the scheduler's,
is what this probe tells: it times the same pure-Python loop (``WORK`` iterations, about 2 ms) on each vCPU in turn
and :func:`probe_rows` gives each generation's median. The probe takes about 4% of one vCPU.

Session 26: it answered yes (the rate's rank correlation with the probe's time -0.70 over 96 generations), and the
host's speed moved in phases of seconds, so a one-second generation's median of ten samples (every 0.1 s then) was a
noisy measure of it; every 0.05 s since.

    python -m benchmarks.gpu.cpu_probe record --out run.probe.jsonl [--interval 0.05]    (until SIGTERM)

Each line: ``{"t": monotonic end, "ms": workload time, "cpu": vCPU}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from benchmarks.gpu.cpu_monitor import until_stopped

WORK = 20_000
"""Iterations of :func:`workload`: about 2 ms of one core of the GPU machines' hosts."""


def workload(iterations: int = WORK) -> int:
    """Interpreter-bound arithmetic, like a scheduler's per-request Python: no allocation that grows, no I/O."""
    total = 0
    for i in range(iterations):
        total += (i * i) % 7
    return total


def record(out: Path, interval: float, stop_after: float | None = None, cpus: list[int] | None = None) -> None:
    """Time :func:`workload` every ``interval`` s, moving to the next of ``cpus`` (default: every vCPU this process
    may use) before each run, until SIGTERM/SIGINT or ``stop_after`` seconds. The caller's signal handlers and
    affinity are back in place on return."""
    allowed = os.sched_getaffinity(0)
    cpus = cpus if cpus is not None else sorted(allowed)
    turn = 0
    try:
        with until_stopped(stop_after) as running, open(out, "w") as sink:
            while running():
                cpu = cpus[turn % len(cpus)]
                turn += 1
                os.sched_setaffinity(0, {cpu})
                start = time.perf_counter()
                workload()
                sample = {"t": round(time.monotonic(), 4), "ms": round((time.perf_counter() - start) * 1e3, 4)}
                sink.write(json.dumps(sample | {"cpu": cpu}) + "\n")
                sink.flush()
                time.sleep(interval)
    finally:
        os.sched_setaffinity(0, allowed)


def load(path: Path) -> list[dict]:
    """The probe's samples, in order (a last line cut by SIGKILL is skipped)."""
    samples = []
    for line in path.read_text().splitlines():
        try:
            samples.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return samples


def probe_rows(path: Path, windows: list[tuple[float, float]]) -> list[dict]:
    """Per window (``time.monotonic`` / ``perf_counter`` seconds of the same machine): the median workload time of
    the samples that ended in it (``probe_ms``) and how many (``probe_samples``); ``{}`` for a window without one."""
    samples = load(path)
    rows = []
    for begin, end in windows:
        inside = [s["ms"] for s in samples if begin <= s["t"] <= end]
        rows.append({"probe_ms": round(statistics.median(inside), 3), "probe_samples": len(inside)} if inside else {})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--interval", type=float, default=0.05)
    rec.add_argument("--stop-after", type=float, default=None)
    args = parser.parse_args(argv)
    record(args.out, args.interval, args.stop_after)


if __name__ == "__main__":
    main()
