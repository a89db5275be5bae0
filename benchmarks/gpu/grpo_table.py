"""The GPU GRPO benchmark's summaries and table (:mod:`benchmarks.bench_gpu_grpo`): per-run means of steps 2.. and
the markdown table against the standalone engines and TRL."""

from __future__ import annotations

import statistics

from benchmarks.gpu.generation_context import describe_matched, host_matched_ratio

PROMPTS, SAMPLES, RESPONSE_LENGTH, MAX_PROMPT_LENGTH = 32, 8, 256, 256
VERL_ENGINES = ("vllm", "sglang", "hf")
GC_KEYS = ("rollout/gc_pause_s", "rollout/gc_full_pause_s", "rollout/gc_full_collections")
SYNC_PART_KEYS = (
    "rollout/sync_empty_cache_s",
    "rollout/sync_wake_weights_s",
    "rollout/sync_send_s",
    "rollout/sync_wake_cache_s",
)
AVERAGED_KEYS = GC_KEYS + SYNC_PART_KEYS + ("rollout/sync_empty_cache_skipped",)
"""Worker metrics a run's summary averages when its records have them: the garbage collector's pauses inside each
generation (verl.utils.gc_heap), the weight sync's parts (verl.workers.sharding_manager.base) and the fraction of
wakes that kept training's cached blocks (verl.workers.sharding_manager.memory.WakeMemory)."""
END_MEMORY = "perf/device_memory_used_gb"
"""The workers' device memory in use as each phase ends (``<key>/<phase>``, verl.workers.sharding_manager.memory's
``phase_end_memory``): the table's memory column where no NVML sampler ran beside the run."""
PEAK_PHASES = ("gen", "old_log_prob", "ref", "update_actor")
BREAKDOWN = ("gen", "update_weights", "release_memory", "reward", "old_log_prob", "ref", "adv", "update_actor")


def split_run(name: str) -> tuple[str, str | None]:
    """``engine@variant`` -> (engine, variant); a plain name has no variant. A ``#N`` suffix (``standalone-sglang#2``)
    names the same setup run again later in the call (:func:`setup_of`) and is not part of either."""
    engine, _, variant = setup_of(name).partition("@")
    return engine, variant or None


def setup_of(name: str) -> str:
    """A run's name without its repeat suffix: ``standalone-sglang#2`` -> ``standalone-sglang``.

    A setup listed twice in ``--runs`` (the second time as ``NAME#2``) is measured twice, each run with its own files:
    a bare engine run before and again after its loop brackets the loop in time, and the table pools both (the host's
    Python speed, which sets a small model's decode rate, drifts over a call: session 26)."""
    return name.partition("#")[0]


def summarize_verl(records: list[dict]) -> dict:
    """Means over steps 2.. (step 1 holds compilation and allocator warm-up) of what the table shows."""
    steps = [r for r in records if "timing_s/step" in r]
    steady = steps[1:] or steps
    if not steady:
        return {}

    def mean(key: str) -> float | None:
        values = [float(r[key]) for r in steady if key in r]
        return statistics.mean(values) if values else None

    summary = {"steps": len(steps), "step_s": mean("timing_s/step")}
    for key in BREAKDOWN:
        summary[key] = mean(f"timing_s/{key}")
    rows = PROMPTS * SAMPLES
    timed = [r for r in steady if "response_length/mean" in r]
    tokens = [float(r["response_length/mean"]) * rows for r in timed]
    if tokens:
        summary["response_tokens"] = statistics.mean(tokens)
        summary["gen_tokens_per_s"] = sum(tokens) / sum(float(r["timing_s/gen"]) for r in timed)
        # each step's own rate: a small model's decode level is drawn per generation (sessions 22-36), so the spread
        # of the steps says how much of a loop's ratio is the draw
        summary["step_gen_tokens_per_s"] = [n / float(r["timing_s/gen"]) for n, r in zip(tokens, timed, strict=True)]
        sync = ("timing_s/update_weights", "timing_s/release_memory")
        engine_only = [float(r["timing_s/gen"]) - sum(float(r.get(key, 0.0)) for key in sync) for r in timed]
        summary["engine_tokens_per_s"] = sum(tokens) / sum(engine_only)
        if all("timing_s/rollout_call" in r for r in timed):  # the rollout's own call: the engine and the padding
            summary["call_tokens_per_s"] = sum(tokens) / sum(float(r["timing_s/rollout_call"]) for r in timed)
    for phase in ("gen", "old_log_prob", "ref", "update_actor", "step"):
        values = [r[f"peak_gib/{phase}"] for r in steady if f"peak_gib/{phase}" in r]
        if values:
            summary[f"peak_gib/{phase}"] = max(values)
        ends = [r[f"{END_MEMORY}/{phase}"] for r in steady if f"{END_MEMORY}/{phase}" in r]
        if ends:
            summary[f"end_gib/{phase}"] = max(ends)
    for key in ("perf/rollout_device_memory_used_gb", "perf/training_device_memory_used_gb"):
        summary[key] = mean(key)
    for key in AVERAGED_KEYS:
        if any(key in r for r in steady):
            summary[key] = mean(key)
    # the trainer's generation time outside the worker's call: dispatch, transfers, and whatever the worker does
    # after its timer stops (session 17: 0.1 s a step of a heap walk there, found this way)
    outside = [float(r["timing_s/gen"]) - float(r["timing_s/generate_sequences"]) for r in steady
               if "timing_s/generate_sequences" in r and "timing_s/gen" in r]  # fmt: skip
    if outside:
        summary["gen_outside_worker_s"] = statistics.mean(outside)
    return summary


def _fmt(value, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def _bare_runs(summaries: dict[str, dict], name: str) -> dict[str, dict]:
    """The bare engine's runs for loop run ``name`` (``engine[@variant]``), by run name: the same variant's bare
    setup where one ran, else the plain one, each time it ran (``#N`` repeats); {} where neither ran."""
    engine, variant = split_run(name)
    for setup in (f"standalone-{engine}@{variant}", f"standalone-{engine}"):
        runs = {run: s for run, s in summaries.items() if setup_of(run) == setup and s}
        if runs:
            return runs
    return {}


def _rate(bare: dict) -> float | None:
    """One bare run's tokens/s over all its repeats (its median where only that was recorded)."""
    return bare.get("mean_tokens_per_s", bare.get("tokens_per_s"))


def _bare_rate(summaries: dict[str, dict], name: str) -> float | None:
    """The bare engine's tokens/s for loop run ``name``: all tokens over all seconds of every repeat of every run of
    its bare setup (the mean of the runs' rates where a run did not record its totals)."""
    runs = list(_bare_runs(summaries, name).values())
    if runs and all("total_tokens" in s and s.get("total_seconds") for s in runs):
        return sum(s["total_tokens"] for s in runs) / sum(s["total_seconds"] for s in runs)
    rates = [rate for rate in map(_rate, runs) if rate]
    return statistics.mean(rates) if rates else None


def _bare_generations(summaries: dict[str, dict], name: str) -> list[dict]:
    """Every monitored generation of the bare setup's runs (the host-matched ratio's bare side)."""
    return [g for s in _bare_runs(summaries, name).values() for g in s.get("generations") or []]


def _memory_cell(summary: dict) -> str:
    """The table's memory cell: the NVML sampler's peak of each phase, else (no sampler) the device memory in use
    as each phase ended, marked "(end)"."""
    if any(summary.get(f"peak_gib/{p}") is not None for p in PEAK_PHASES):
        return " / ".join(_fmt(summary.get(f"peak_gib/{p}"), 1) for p in PEAK_PHASES)
    if any(summary.get(f"end_gib/{p}") is not None for p in PEAK_PHASES):
        return " / ".join(_fmt(summary.get(f"end_gib/{p}"), 1) for p in PEAK_PHASES) + " (end)"
    return " / ".join("-" for _ in PEAK_PHASES)


def _spread_line(step_rates: list[float], bare_runs: list[dict], bare_rate: float | None) -> str:
    """Each steady step's generation rate in call order, then the range of the bare engine's repeats (every run of
    its setup) and the share of ``bare_rate`` the loop's fastest step reached."""
    line = "each step's generation (steps 2..) " + ", ".join(f"{rate / 1000:.1f}k" for rate in step_rates) + " tok/s"
    repeats = [rate for bare in bare_runs for rate in bare.get("all_tokens_per_s") or []]
    if repeats:
        line += f"; the bare engine's repeats {min(repeats) / 1000:.1f}-{max(repeats) / 1000:.1f}k"
    if bare_rate:
        line += f"; the fastest step {max(step_rates) / bare_rate:.0%} of the bare engine"
    return line


def ratio_of(loop: dict, bare_rate: float | None) -> str:
    """The loop's generation rate and its engine-only rate as shares of ``bare_rate``, as "gen / engine"."""
    return " / ".join(
        f"{loop[key] / bare_rate:.0%}" if bare_rate and loop.get(key) else "-"
        for key in ("gen_tokens_per_s", "engine_tokens_per_s")
    )


def render_table(summaries: dict[str, dict], card: str) -> str:
    """The markdown table: one row per verl engine, then the standalone engines and TRL."""
    trl = summaries.get("trl", {}).get("mean_step_s")
    lines = [
        f"GRPO GSM8K SmolLM2-135M bf16, {PROMPTS} prompts x {SAMPLES} x <= {RESPONSE_LENGTH} tokens, on {card}",
        "",
        "| run | step s | TRL s / step s | gen s | update_weights s | release s | old_log_prob s | ref s"
        " | update_actor s | gen tok/s | engine tok/s | vs standalone (gen / engine)"
        " | peak GiB gen / old_lp / ref / update (end: in use as the phase ended) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    verl_runs = [name for name in summaries if split_run(name)[0] in VERL_ENGINES]
    for name in verl_runs:
        s = summaries[name]
        if "error" in s and "step_s" not in s:
            lines.append(f"| {name} | failed: {s['error']} |" + " |" * 11)
            continue
        standalone = _bare_rate(summaries, name)
        ratio = ratio_of(s, standalone)
        speedup = f"{trl / s['step_s']:.2f}x" if trl and s.get("step_s") else "-"
        peaks = _memory_cell(s)
        cells = [
            name + (f" (GPU {s['gpu']})" if "gpu" in s else ""),
            _fmt(s.get("step_s")),
            speedup,
            _fmt(s.get("gen")),
            _fmt(s.get("update_weights"), 3),
            _fmt(s.get("release_memory"), 3),
            _fmt(s.get("old_log_prob")),
            _fmt(s.get("ref")),
            _fmt(s.get("update_actor")),
            _fmt(s.get("gen_tokens_per_s"), 0),
            _fmt(s.get("engine_tokens_per_s"), 0),
            ratio,
            peaks,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for name, s in summaries.items():
        if name.startswith("standalone-"):
            lines.append(
                f"- {name}: {_fmt(s.get('mean_tokens_per_s'), 0)} tok/s over all repeats, median "
                f"{_fmt(s.get('tokens_per_s'), 0)} ({_fmt(s.get('tokens'), 0)} tokens in {_fmt(s.get('seconds'))} s);"
                f" engine start {_fmt(s.get('startup_s'), 1)} s" + (f" failed: {s['error']}" if "error" in s else "")
            )
    for name in verl_runs:
        s = summaries[name]
        standalone = _bare_rate(summaries, name)
        if s.get("call_tokens_per_s"):
            share = f" ({s['call_tokens_per_s'] / standalone:.0%} of its bare engine)" if standalone else ""
            lines.append(f"- {name}: the rollout's own call {_fmt(s['call_tokens_per_s'], 0)} tok/s{share}")
        runs = _bare_runs(summaries, name)
        if len(runs) > 1 and s.get("gen_tokens_per_s"):  # bracketed in time: each bare run's share, then pooled
            shares = ", ".join(
                f"{run} {s['gen_tokens_per_s'] / _rate(bare):.0%} ({_fmt(_rate(bare), 0)} tok/s)"
                for run, bare in runs.items() if _rate(bare)
            )  # fmt: skip
            pooled = ratio_of(s, standalone)
            lines.append(
                f"- {name}: generation against each bare run, in call order: {shares}; pooled {pooled} (gen / engine)"
            )
        if s.get("step_gen_tokens_per_s"):
            lines.append(f"- {name}: {_spread_line(s['step_gen_tokens_per_s'], list(runs.values()), standalone)}")
        sampled = [p for p in PEAK_PHASES if s.get(f"peak_gib/{p}") is not None and s.get(f"end_gib/{p}") is not None]
        if sampled:  # both measures of one run: how close the sampler-free one comes
            pairs = ", ".join(f"{p} {s[f'end_gib/{p}']:.1f} / {s[f'peak_gib/{p}']:.1f}" for p in sampled)
            lines.append(f"- {name}: device GiB as each phase ended (workers) / the sampler's peak: {pairs}")
        matched = host_matched_ratio(_bare_generations(summaries, name), s.get("generations") or [])
        if matched:
            lines.append(
                f"- {name}: at the same host speed, the rollout's own call makes {describe_matched(matched, True)} of"
                f" its bare engine's tok/s (one slope of log tok/s on log probe ms, {sum(matched['generations'])}"
                " generations)"
            )
    if "trl" in summaries:
        s = summaries["trl"]
        lines.append(
            f"- TRL GRPOTrainer: {_fmt(s.get('mean_step_s'))} s/step (steps 2..{s.get('steps', '?')})"
            + (f" failed: {s['error']}" if "error" in s else "")
        )
    return "\n".join(lines) + "\n"
