"""The GPU GRPO table's ratios: the loop's generation against its bare engine taken the same way (all tokens over all
time), with and without the weight sync, from hand-made records."""

from benchmarks.gpu import grpo_table


def _step(step: int, gen: float, sync: float, release: float, mean_length: float) -> dict:
    return {"step": step, "timing_s/step": gen + 1.0, "timing_s/gen": gen, "timing_s/update_weights": sync,
            "timing_s/release_memory": release, "response_length/mean": mean_length}  # fmt: skip


def test_loop_rates_are_over_steps_two_on_and_exclude_the_sync_for_the_engine_rate():
    rows = grpo_table.PROMPTS * grpo_table.SAMPLES  # 256 sequences a step
    records = [_step(1, 9.0, 0.5, 0.1, 100.0), _step(2, 1.0, 0.1, 0.0, 200.0), _step(3, 2.0, 0.2, 0.1, 100.0)]
    summary = grpo_table.summarize_verl(records)
    tokens = rows * 200 + rows * 100  # step 1 (compilation) is left out
    assert summary["steps"] == 3
    assert summary["gen_tokens_per_s"] == tokens / 3.0
    assert abs(summary["engine_tokens_per_s"] - tokens / (0.9 + 1.7)) < 1e-9
    assert "rollout/gc_pause_s" not in summary  # records without the collector's metrics


def test_sync_parts_and_the_time_outside_the_worker_are_averaged_over_steps_two_on():
    records = [_step(1, 9.0, 0.5, 0.1, 100.0), _step(2, 1.0, 0.1, 0.0, 200.0), _step(3, 2.0, 0.2, 0.1, 100.0)]
    for record, send, worker in zip(records, (0.4, 0.05, 0.15), (8.0, 0.9, 1.7), strict=True):
        record.update({"rollout/sync_send_s": send, "timing_s/generate_sequences": worker})
    summary = grpo_table.summarize_verl(records)
    assert abs(summary["rollout/sync_send_s"] - 0.1) < 1e-9
    assert abs(summary["gen_outside_worker_s"] - 0.2) < 1e-9  # (1.0 - 0.9 + 2.0 - 1.7) / 2
    assert "rollout/sync_wake_weights_s" not in summary


def test_collector_pauses_are_averaged_over_steps_two_on():
    records = [_step(1, 9.0, 0.5, 0.1, 100.0), _step(2, 1.0, 0.1, 0.0, 200.0), _step(3, 2.0, 0.2, 0.1, 100.0)]
    for record, pause, full in zip(records, (0.9, 0.2, 0.0), (3.0, 1.0, 0.0), strict=True):
        record.update({"rollout/gc_pause_s": pause, "rollout/gc_full_collections": full})
    summary = grpo_table.summarize_verl(records)
    assert summary["rollout/gc_pause_s"] == 0.1
    assert summary["rollout/gc_full_collections"] == 0.5
    assert "rollout/gc_full_pause_s" not in summary


def test_table_compares_with_the_bare_engines_rate_over_all_repeats_and_its_own_variant():
    loop = {"step_s": 2.0, "gen_tokens_per_s": 40_000.0, "engine_tokens_per_s": 45_000.0}
    summaries = {
        "sglang": loop,
        "sglang@pin": dict(loop),
        "standalone-sglang": {"tokens_per_s": 60_000.0, "mean_tokens_per_s": 50_000.0},
        "standalone-sglang@pin": {"tokens_per_s": 60_000.0, "mean_tokens_per_s": 40_000.0},
        "trl": {"mean_step_s": 10.0},
    }
    table = grpo_table.render_table(summaries, "test card")
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| sglang")}
    assert "| 80% / 90% |" in rows["sglang"]  # 40k and 45k against 50k, not against the 60k median
    assert "| 100% / 112% |" in rows["sglang@pin"]  # against the pinned bare engine
    assert "5.00x" in rows["sglang"]


def test_the_rollouts_own_call_is_rated_when_every_step_timed_it():
    rows = grpo_table.PROMPTS * grpo_table.SAMPLES
    records = [_step(1, 9.0, 0.5, 0.1, 100.0), _step(2, 1.0, 0.1, 0.0, 200.0), _step(3, 2.0, 0.2, 0.1, 100.0)]
    assert "call_tokens_per_s" not in grpo_table.summarize_verl(records)  # records from before the key
    for record, call in zip(records, (8.0, 0.75, 1.25), strict=True):
        record["timing_s/rollout_call"] = call
    summary = grpo_table.summarize_verl(records)
    assert summary["call_tokens_per_s"] == (rows * 200 + rows * 100) / 2.0  # 0.75 + 1.25 s over steps 2 and 3
    table = grpo_table.render_table(
        {"sglang": {**summary, "step_s": 2.0}, "standalone-sglang": {"mean_tokens_per_s": 48_000.0}}, "test card"
    )
    assert "- sglang: the rollout's own call 38,400 tok/s (80% of its bare engine)" in table


def test_the_loop_is_set_against_its_bare_engine_at_the_same_host_speed():
    def generations(per_ms: float, probes: tuple[float, ...]) -> list[dict]:
        return [{"tokens_per_s": per_ms / probe, "probe_ms": probe} for probe in probes]

    loop = {"step_s": 2.0, "call_tokens_per_s": 30_000.0, "generations": generations(72_000.0, (2.0, 2.2, 2.4))}
    bare = {"mean_tokens_per_s": 60_000.0, "generations": generations(80_000.0, (1.0, 1.1, 1.2))}
    table = grpo_table.render_table({"sglang": loop, "standalone-sglang": bare}, "test card")
    assert "- sglang: the rollout's own call 30,000 tok/s (50% of its bare engine)" in table  # two host draws apart
    matched = "- sglang: at the same host speed, the rollout's own call makes 90% (95% 90%-90%, slope -1.00) of its"
    assert matched + " bare engine's tok/s" in table
    assert "(one slope of log tok/s on log probe ms, 6 generations)" in table
    without_probes = {"sglang": {"step_s": 2.0}, "standalone-sglang": {"mean_tokens_per_s": 60_000.0}}
    assert "same host speed" not in grpo_table.render_table(without_probes, "test card")


def test_a_bare_engine_run_before_and_after_its_loop_is_pooled_over_all_repeats():
    # before the loop: 5 repeats, 300k tokens in 5 s (60k tok/s); after it: 300k tokens in 7.5 s (40k tok/s);
    # pooled 600k tokens in 12.5 s = 48k tok/s, not the 50k mean of the two rates
    before = {"mean_tokens_per_s": 60_000.0, "total_tokens": 300_000, "total_seconds": 5.0}
    after = {"mean_tokens_per_s": 40_000.0, "total_tokens": 300_000, "total_seconds": 7.5}
    loop = {"step_s": 2.0, "gen_tokens_per_s": 36_000.0, "engine_tokens_per_s": 43_200.0}
    summaries = {"standalone-sglang": before, "sglang": loop, "standalone-sglang#2": after, "trl": {"mean_step_s": 8.0}}
    table = grpo_table.render_table(summaries, "test card")
    row = next(line for line in table.splitlines() if line.startswith("| sglang |"))
    assert "| 75% / 90% |" in row  # 36k and 43.2k against 48k
    bracket = "- sglang: generation against each bare run, in call order: standalone-sglang 60% (60,000 tok/s),"
    assert bracket + " standalone-sglang#2 90% (40,000 tok/s); pooled 75% / 90% (gen / engine)" in table
    assert "- standalone-sglang#2: 40,000 tok/s over all repeats" in table


def test_runs_without_totals_pool_as_the_mean_of_their_rates_and_a_variant_keeps_its_own_bare_runs():
    summaries = {
        "standalone-vllm": {"mean_tokens_per_s": 30_000.0},
        "vllm": {"step_s": 3.0, "gen_tokens_per_s": 27_000.0},
        "standalone-vllm#2": {"mean_tokens_per_s": 40_000.0},
        "standalone-vllm@x": {"mean_tokens_per_s": 20_000.0},
        "vllm@x": {"step_s": 3.0, "gen_tokens_per_s": 20_000.0},
    }
    table = grpo_table.render_table(summaries, "test card")
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| vllm")}
    assert "| 77% / - |" in rows["vllm"]  # 27k against (30k + 40k) / 2
    assert "| 100% / - |" in rows["vllm@x"]
    assert grpo_table.split_run("standalone-vllm@x#2") == ("standalone-vllm", "x")
    assert grpo_table.setup_of("standalone-vllm#2") == "standalone-vllm"


def test_without_the_sampler_the_memory_column_is_the_workers_device_use_as_each_phase_ended():
    records = [_step(1, 9.0, 0.5, 0.1, 100.0), _step(2, 1.0, 0.1, 0.0, 200.0), _step(3, 2.0, 0.2, 0.1, 100.0)]
    for record, gen, ref in zip(records, (120.0, 99.0, 101.0), (80.0, 78.0, 79.0), strict=True):
        record.update({"perf/device_memory_used_gb/gen": gen, "perf/device_memory_used_gb/ref": ref})
    summary = grpo_table.summarize_verl(records)
    assert summary["end_gib/gen"] == 101.0 and summary["end_gib/ref"] == 79.0  # steps 2.. only, their largest
    table = grpo_table.render_table({"sglang": {**summary, "step_s": 2.0}}, "test card")
    assert "| 101.0 / - / 79.0 / - (end) |" in table
    assert "the sampler's peak" not in table
    sampled = {**summary, "step_s": 2.0, "peak_gib/gen": 104.6, "peak_gib/ref": 83.8}
    table = grpo_table.render_table({"sglang": sampled}, "test card")
    assert "| 104.6 / - / 83.8 / - |" in table  # the sampler's peaks where it ran
    assert (
        "- sglang: device GiB as each phase ended (workers) / the sampler's peak: gen 101.0 / 104.6, ref 79.0 / 83.8"
        in table
    )


def test_each_steady_steps_rate_is_listed_beside_the_bare_engines_repeats():
    rows = grpo_table.PROMPTS * grpo_table.SAMPLES
    # step 1 is compilation; steps 2 and 3: 256 x 200 tokens in 1 s, 256 x 100 in 2 s
    records = [_step(1, 9.0, 0.5, 0.1, 100.0), _step(2, 1.0, 0.1, 0.0, 200.0), _step(3, 2.0, 0.2, 0.1, 100.0)]
    loop = grpo_table.summarize_verl(records)
    assert loop["step_gen_tokens_per_s"] == [rows * 200 / 1.0, rows * 100 / 2.0]  # 51,200 and 12,800
    bare = {"total_tokens": 640_000, "total_seconds": 10.0, "all_tokens_per_s": [60_000.0, 68_000.0]}
    table = grpo_table.render_table({"sglang": loop, "standalone-sglang": bare}, "test card")
    assert (
        "- sglang: each step's generation (steps 2..) 51.2k, 12.8k tok/s; the bare engine's repeats 60.0-68.0k;"
        " the fastest step 80% of the bare engine"  # 51,200 of the pooled 64,000
    ) in table.splitlines()
