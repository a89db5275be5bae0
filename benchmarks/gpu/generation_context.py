"""What each timed generation of a benchmark ran beside (issue 14's per-generation decode level).

Session 22 (``benchmarks/results/gpu_session22_2026-11-29.md``): with the same batch, weights and seed every time, the
SGLang scheduler's decode rate in the isolated rollout (``benchmarks.gpu.sglang_gap``) changed from one generation to
the next between about 40k and 80k tokens/s, steady within each; the bare engine held 80-87k in all but one of its
six. Five repeats a setup then rank setups by chance. This puts each generation of a run next to what the machine did
during it, to find what sets the level:

- the busiest thread of the run in that window (the engine's driving thread: SGLang's scheduler, or the process that
  calls vLLM's in-process engine), the vCPUs it ran on, how much of a core it got and how much of that in system
  calls (the one-GPU machines run under gVisor, which serves them in its own kernel);
- the other threads that were busy (``busy_cores`` or more) on the same physical cores (hyperthread siblings
  included, :func:`benchmarks.gpu.affinity.sibling_groups`), and the host's steal time;
- the GPU's SM clock, power and SM use from ``nvidia-smi dmon`` (once a second, wall-clock time stamps), where it ran:
  SM use that falls with the rate means the GPU waited for the host (session 25);
- how long :mod:`benchmarks.gpu.cpu_probe`'s fixed Python workload took on the host's vCPUs meanwhile.

:func:`print_rows` ends with the rank correlation of the rate with each of these across the generations.

Session 26: the probe's time tracked the rate (rank correlation -0.70 over 96 generations of six runs, -0.94 across
the runs' medians), so one run against another is also a comparison of two draws of the host's speed.
:func:`host_matched_ratio` compares two runs at the same probe time instead.

Inputs: :mod:`benchmarks.gpu.cpu_monitor`'s file (``time.monotonic()`` stamps, the clock of ``time.perf_counter``),
each generation's ``perf_counter`` window and its tokens/s. Read on the machine that ran them, right after: the
monotonic clock is the machine's, so one offset to ``time.time()`` gives the windows' wall-clock times for dmon.
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time
from datetime import datetime
from pathlib import Path

from benchmarks.gpu.affinity import sibling_groups
from benchmarks.gpu.cpu_monitor import load
from benchmarks.gpu.cpu_probe import probe_rows

BUSY_CORES = 0.2
"""A thread with this much of a core or more in a sample counts as busy beside the engine's thread."""


def _core_of(groups: list[list[int]]) -> dict[int, int]:
    """vCPU -> index of its physical core."""
    return {cpu: index for index, group in enumerate(groups) for cpu in group}


def cpu_rows(path: Path, windows: list[tuple[float, float]], groups: list[list[int]] | None = None) -> list[dict]:
    """Per window: the busiest thread (``engine_thread``: "process | thread"), its mean cores, the system-call part
    of them (``engine_system_cores``, where the file records it) and its vCPUs, the busy threads that shared its
    physical core (``sharing``: name -> samples), the number of busy threads, and the host's mean steal (cores).
    Samples are those whose end falls in the window; a window without one gets ``samples`` 0, one whose samples saw
    no watched thread only its steal."""
    names, samples = load(path)
    core = _core_of(groups if groups is not None else sibling_groups(set(range(os.cpu_count() or 1))))
    rows = []
    for begin, end in windows:
        inside = [s for s in samples if begin <= s["t"] <= end]
        row: dict = {"samples": len(inside)}
        if not inside:
            rows.append(row)
            continue
        totals: dict[str, float] = {}
        for sample in inside:
            for key, (cores, *_) in sample["threads"].items():
                totals[key] = totals.get(key, 0.0) + cores / len(inside)
        steal = round(statistics.mean(s["host"].get("steal", 0.0) for s in inside), 2)
        if not totals:
            rows.append({**row, "steal_cores": steal})
            continue
        engine = max(totals, key=totals.get)
        engine_cpus: list[int] = []
        engine_system: list[float] = []  # files before session 23 record no system part
        sharing: dict[str, int] = {}
        busy = set()
        for sample in inside:
            threads = sample["threads"]
            if engine not in threads:
                continue
            engine_cpu = threads[engine][1]
            engine_cpus.append(engine_cpu)
            engine_system += threads[engine][2:3]
            for key, (cores, cpu, *_) in threads.items():
                if key == engine or cores < BUSY_CORES:
                    continue
                busy.add(key)
                if core.get(cpu, cpu) == core.get(engine_cpu, engine_cpu):
                    name = " | ".join(names.get(key, ["?", "?"]))
                    sharing[name] = sharing.get(name, 0) + 1
        row.update(
            engine_thread=" | ".join(names.get(engine, ["?", "?"])),
            engine_cores=round(totals[engine], 2),
            engine_cpus=sorted(set(engine_cpus)),
            **({"engine_system_cores": round(sum(engine_system) / len(inside), 2)} if engine_system else {}),
            sharing=sharing,
            busy_threads=len(busy),
            steal_cores=steal,
        )
        rows.append(row)
    return rows


def dmon_rows(path: Path, wall_windows: list[tuple[float, float]]) -> list[dict]:
    """Per wall-clock window: median SM clock (MHz), power (W) and SM use (%) of the ``nvidia-smi dmon -o T`` lines
    whose second overlaps it (dmon prints once a second, stamped to the second), else of the last line before it;
    empty where the file has none."""
    if not path.exists():
        return [{} for _ in wall_windows]
    header: list[str] = []
    lines: list[tuple[float, dict[str, str]]] = []
    for text in path.read_text().splitlines():
        fields = text.split()
        if not fields:
            continue
        if fields[0] == "#Time":
            header = fields[1:]
            continue
        if fields[0].startswith("#") or not header or len(fields) < len(header) + 1:
            continue
        lines.append((_seconds_of_day(fields[0]), dict(zip(header, fields[1:]))))
    rows = []
    for begin, end in wall_windows:
        b, e = _seconds_of_day_wall(begin), _seconds_of_day_wall(end)
        inside = [values for t, values in lines if t <= e and t + 1.0 > b]  # a line stamped t covers [t, t + 1)
        if not inside:
            before = [values for t, values in lines if t <= b]
            inside = before[-1:]
        row = {}
        for column, key in (("pclk", "sm_clock_mhz"), ("pwr", "power_w"), ("sm", "sm_percent")):
            numbers = [float(v[column]) for v in inside if v.get(column, "-").replace(".", "", 1).isdigit()]
            if numbers:
                row[key] = statistics.median(numbers)
        rows.append(row)
    return rows


def _seconds_of_day(stamp: str) -> float:
    hours, minutes, seconds = stamp.split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def _seconds_of_day_wall(timestamp: float) -> float:
    moment = datetime.fromtimestamp(timestamp)
    return moment.hour * 3600 + moment.minute * 60 + moment.second + moment.microsecond / 1e6


def per_generation(out: Path, name: str, result: dict) -> list[dict]:
    """Rows for run ``name``'s timed generations: ``result`` has ``all_tokens_per_s`` and ``windows``
    (``perf_counter``, on this machine); ``out/<name>.cpu.jsonl`` and ``out/<name>.dmon.log`` are read where they
    exist."""
    rates = result.get("all_tokens_per_s") or []
    windows = [tuple(w) for w in result.get("windows") or []]
    offset = time.time() - time.perf_counter()  # the machine's monotonic clock -> wall clock
    wall = [(begin + offset, end + offset) for begin, end in windows]
    cpu_path = out / f"{name}.cpu.jsonl"
    cpu = cpu_rows(cpu_path, windows) if cpu_path.exists() else [{} for _ in windows]
    gpu = dmon_rows(out / f"{name}.dmon.log", wall)
    probe_path = out / f"{name}.probe.jsonl"
    probe = probe_rows(probe_path, windows) if probe_path.exists() else [{} for _ in windows]
    return [{"tokens_per_s": rate, **c, **g, **p} for rate, c, g, p in zip(rates, cpu, gpu, probe)]


def rank_correlation(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation (ties share their mean rank); None for fewer than three pairs or a constant side."""
    if len(xs) < 3 or len(xs) != len(ys):
        return None

    def ranks(values: list[float]) -> list[float]:
        order = sorted(range(len(values)), key=values.__getitem__)
        result = [0.0] * len(values)
        start = 0
        while start < len(order):
            stop = start
            while stop + 1 < len(order) and values[order[stop + 1]] == values[order[start]]:
                stop += 1
            for position in range(start, stop + 1):
                result[order[position]] = (start + stop) / 2 + 1
            start = stop + 1
        return result

    rx, ry = ranks(xs), ranks(ys)
    if len(set(rx)) == 1 or len(set(ry)) == 1:
        return None
    return statistics.correlation(rx, ry)


CORRELATED = (("engine_cores", "engine thread cores"), ("sm_percent", "SM %"), ("probe_ms", "probe ms"))
"""Columns whose rank correlation with the rate :func:`print_rows` reports."""


def correlations(rows: list[dict]) -> dict[str, float]:
    """Rank correlation of each generation's tokens/s with each of :data:`CORRELATED` over the rows that have it."""
    found = {}
    for key, _ in CORRELATED:
        pairs = [(row["tokens_per_s"], row[key]) for row in rows if row.get(key) is not None]
        rho = rank_correlation([a for a, _ in pairs], [b for _, b in pairs])
        if rho is not None:
            found[key] = rho
    return found


RESAMPLES = 1000
"""Bootstrap resamples behind :func:`host_matched_ratio`'s interval."""


def _common_slope_fit(groups: list[list[tuple[float, float]]]) -> tuple[float, float] | None:
    """``(exp(a_1 - a_0), b)`` of ``y = a_g + b x`` fitted to two groups of ``(x, y)`` by least squares within each;
    None where ``x`` varies within neither."""
    centred = []
    for pairs in groups:
        mean_x = statistics.fmean(x for x, _ in pairs)
        mean_y = statistics.fmean(y for _, y in pairs)
        centred.append((mean_x, mean_y, [(x - mean_x, y - mean_y) for x, y in pairs]))
    sxx = sum(dx * dx for _, _, deviations in centred for dx, _ in deviations)
    if sxx == 0:
        return None
    slope = sum(dx * dy for _, _, deviations in centred for dx, dy in deviations) / sxx
    (ref_x, ref_y, _), (run_x, run_y, _) = centred
    return math.exp((run_y - slope * run_x) - (ref_y - slope * ref_x)), slope


def host_matched_ratio(reference: list[dict], rows: list[dict]) -> dict | None:
    """``rows``' tokens/s over ``reference``'s at the same host speed: ``log(tok/s) = a + b log(probe ms)`` with one
    slope ``b`` for both runs and an intercept ``a`` each (least squares within each run: a covariance analysis), the
    ratio ``exp(a_rows - a_reference)``, and its 95% interval from :data:`RESAMPLES` bootstrap resamples of each
    run's generations (seeded: the same rows give the same interval; None where no resample could be fitted). The
    generations without a probe time are left out. None where either run has fewer than two generations with one or
    the probe time varies within neither run.

    Returns ``{"ratio", "slope", "interval": (low, high), "generations": (reference's, rows')}``."""
    groups = []
    for run in (reference, rows):
        pairs = [(math.log(r["probe_ms"]), math.log(r["tokens_per_s"])) for r in run if r.get("probe_ms")]
        if len(pairs) < 2:
            return None
        groups.append(pairs)
    fitted = _common_slope_fit(groups)
    if fitted is None:
        return None
    rng = random.Random(0)
    resampled = sorted(
        fit[0]
        for _ in range(RESAMPLES)
        if (fit := _common_slope_fit([rng.choices(pairs, k=len(pairs)) for pairs in groups])) is not None
    )
    tail = int(0.025 * len(resampled))
    interval = (resampled[tail], resampled[-tail - 1]) if resampled else None
    return {"ratio": fitted[0], "slope": fitted[1], "interval": interval, "generations": tuple(map(len, groups))}


def describe_matched(matched: dict | None, percent: bool = False) -> str:
    """``host_matched_ratio``'s result in a table cell: ``0.86 (95% 0.78-0.95, slope -0.30)``; ``-`` for None."""
    if matched is None:
        return "-"
    shown = "{:.0%}" if percent else "{:.2f}"
    interval = matched["interval"]
    spread = f"95% {shown.format(interval[0])}-{shown.format(interval[1])}, " if interval else ""
    return f"{shown.format(matched['ratio'])} ({spread}slope {matched['slope']:.2f})"


def print_rows(name: str, rows: list[dict]) -> None:
    """One line per generation, slowest first."""
    print(f"[{name}] generations, slowest first: tok/s | engine thread cores (system part) @ vCPUs | busy threads | "
          "sharing its core | steal | SM MHz | W | SM % | probe ms")  # fmt: skip
    for row in sorted(rows, key=lambda r: r["tokens_per_s"]):
        sharing = ", ".join(f"{k} x{v}" for k, v in row.get("sharing", {}).items()) or "-"
        system = f" ({row['engine_system_cores']} sys)" if "engine_system_cores" in row else ""
        print(
            f"  {row['tokens_per_s']:9,.0f} | {row.get('engine_cores', '-')}{system} @ {row.get('engine_cpus', '-')} | "
            f"{row.get('busy_threads', '-')} | {sharing} | {row.get('steal_cores', '-')} | "
            f"{row.get('sm_clock_mhz', '-')} | {row.get('power_w', '-')} | {row.get('sm_percent', '-')} | "
            f"{row.get('probe_ms', '-')}"
        )
    engines = {row.get("engine_thread") for row in rows if row.get("engine_thread")}
    if engines:
        print(f"  engine thread: {', '.join(sorted(engines))}")
    found = correlations(rows)
    if found:
        labels = dict(CORRELATED)
        print("  rank correlation with tok/s: " + ", ".join(f"{labels[k]} {v:+.2f}" for k, v in found.items()))
