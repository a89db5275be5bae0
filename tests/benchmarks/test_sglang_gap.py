"""sglang_gap's variant names: each suffix turns on exactly one difference from the plain isolated rollout."""

import argparse

import pytest

from benchmarks.gpu.sglang_gap import VARIANTS, block_levels, gate_releases, rollout_options, table

ARGS = argparse.Namespace(churn_gib=30.0, idle_s=2.0, block=4)
PLAIN = {
    "free_cache_engine": True,
    "churn_gib": 0.0,
    "idle_s": 0.0,
    "sleep_on_idle": True,
    "memory_saver": False,
    "release_tags": None,
    "release_every": 1,
}


@pytest.mark.parametrize(
    "variant, changed",
    [
        ("rollout", {}),
        ("rollout-keep", {"free_cache_engine": False}),
        ("rollout-churn", {"churn_gib": 30.0}),
        ("rollout-idle", {"idle_s": 2.0}),
        ("rollout-idle-spin", {"idle_s": 2.0, "sleep_on_idle": False}),
        ("rollout-keep-saver", {"free_cache_engine": False, "memory_saver": True}),
        ("rollout-relkv", {"release_tags": ("kv_cache",)}),
        ("rollout-relrest-idle", {"release_tags": ("weights", "cuda_graph"), "idle_s": 2.0}),
        ("rollout-keep-churn-idle", {"free_cache_engine": False, "churn_gib": 30.0, "idle_s": 2.0}),
        ("rollout-block", {"release_every": 4}),
        ("rollout-relkv-block", {"release_tags": ("kv_cache",), "release_every": 4}),
    ],
)
def test_suffixes_change_only_their_option(variant, changed):
    assert rollout_options(variant, ARGS) == {**PLAIN, **changed}


@pytest.mark.parametrize(
    "variant",
    [
        "rollout-idel",
        "rolout",
        "rollout-ray-idle",
        "bare-idle",
        "rollout-nice0",
        "rollout-keep-nice0",
        "rollout-keep-relkv",
        "rollout-relkv-relrest",
        "rollout-keep-block",
    ],
)
def test_unknown_names_are_refused(variant):
    with pytest.raises(ValueError, match=variant):
        rollout_options(variant, ARGS)


def test_listed_variants_are_distinct_setups():
    """Every rollout variant the benchmark runs by default is its own setup (``rollout-ray[-nice0]`` is ``rollout``
    moved into a Ray actor, so it shares ``rollout``'s options)."""
    ray = ("rollout-ray", "rollout-ray-nice0")
    listed = [v for v in VARIANTS if v != "bare" and v not in ray]
    setups = {tuple(sorted(rollout_options(v, ARGS).items())) for v in listed}
    assert len(setups) == len(listed)
    assert all(rollout_options(v, ARGS) == PLAIN for v in ray)


@pytest.mark.slow
@pytest.mark.parametrize(
    "variant, niceness", [("bare", None), ("rollout", None), ("rollout-ray", 15), ("rollout-ray-nice0", 0)]
)
def test_the_rollout_setup_runs_on_cpu_with_the_vllm_rollout(tmp_path, variant, niceness):
    """``--engine vllm`` on CPU: the bare ``vllm.LLM``, or the isolated rollout (weight sync, generation, release,
    twice) in its own process or inside a Ray actor, with the engine's own call timed inside the rollout's. The actor
    runs at Ray's worker niceness of 15, as ``main_ppo``'s workers do (0 with ``nice0``), with Ray's one OpenMP
    thread."""
    import pandas as pd

    from benchmarks.gpu.sglang_gap import main
    from tests.workers.rollout.helpers import vllm_tiny_path

    rows = [{"prompt": [{"role": "user", "content": f"What is {a} + {a}?"}]} for a in range(4)]
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    argv = ["--engine", "vllm", "--variants", variant, "--model", vllm_tiny_path()]
    argv += ["--data", str(tmp_path / "train.parquet"), "--out", str(tmp_path / "out"), "--prompts", "2", "--n", "2"]
    argv += ["--max-tokens", "8", "--max-prompt-length", "64", "--gpu-memory-utilization", "0.05", "--repeats", "2"]
    argv += ["--max-num-batched-tokens", "1024", "--timeout", "300"]
    (result,) = main(argv)
    assert result["rc"] == 0, (tmp_path / "out" / f"{variant}.log").read_text()[-3000:]
    assert 0 < result["tokens"] <= 2 * 2 * 8  # prompts x samples x max tokens
    assert result["tokens_per_s"] > 0
    if variant != "bare":
        assert result["engine_seconds"] <= result["seconds"]  # the engine's call is inside the rollout's
        assert result["engine_tokens_per_s"] >= result["tokens_per_s"]
    # each generation beside what the machine did during it (the CPU monitor ran beside the variant)
    assert (tmp_path / "out" / f"{variant}.cpu.jsonl").exists()
    assert [g["tokens_per_s"] for g in result["generations"]] == result["all_tokens_per_s"]
    assert len(result["all_tokens_per_s"]) == 2  # --repeats
    if niceness is not None:
        assert (result["worker_niceness"], result["omp_num_threads"]) == (niceness, "1")


def test_spin_needs_sglang():
    with pytest.raises(ValueError, match="sleep_on_idle"):
        rollout_options("rollout-spin", argparse.Namespace(churn_gib=30.0, idle_s=2.0, engine="vllm"))


def test_saver_needs_sglang():
    with pytest.raises(ValueError, match="memory saver"):
        rollout_options("rollout-keep-saver", argparse.Namespace(churn_gib=30.0, idle_s=2.0, engine="vllm"))


def test_block_needs_sglang():
    with pytest.raises(ValueError, match="'block'"):
        rollout_options("rollout-block", argparse.Namespace(churn_gib=30.0, idle_s=2.0, block=4, engine="vllm"))


class RecordingEngine:
    """Records the memory calls ``gate_releases`` lets through to the engine it wraps."""

    def __init__(self):
        self.calls = []

    def release_memory_occupation(self, tags=None):
        self.calls.append(("release", tags))

    def resume_memory_occupation(self, tags=None):
        self.calls.append(("resume", tags))


def test_gate_releases_passes_its_tags_and_skips_the_rest():
    """The sharding manager releases everything, then resumes the weights and then the KV cache with the CUDA
    graphs: with only the KV cache released, the weights' resume must not reach the saver (which refuses to resume
    what it did not pause) and the second resume names the KV cache alone."""
    engine = RecordingEngine()
    gate_releases(engine, ("kv_cache",))
    engine.release_memory_occupation()
    engine.resume_memory_occupation(tags=["weights"])
    engine.resume_memory_occupation(tags=["kv_cache", "cuda_graph"])
    assert engine.calls == [("release", ["kv_cache"]), ("resume", ["kv_cache"])]


def _manager_step(engine, released: bool) -> None:
    """One step of the SGLang sharding manager's memory calls: after a release it resumes the weights, syncs, resumes
    the KV cache with the CUDA graphs; on leaving it releases everything (``fsdp_sglang``)."""
    if released:
        engine.resume_memory_occupation(tags=["weights"])
        engine.resume_memory_occupation(tags=["kv_cache", "cuda_graph"])
    engine.release_memory_occupation()


def test_gate_releases_lets_through_every_third_release_and_only_the_resumes_after_it():
    engine = RecordingEngine()
    released = gate_releases(engine, every=3)
    before = []
    for step in range(7):
        before.append(released())
        _manager_step(engine, released=step > 0)  # the manager thinks every step released
    everything = ["weights", "kv_cache", "cuda_graph"]
    # releases asked at the end of steps 0..6: the 3rd and 6th reach the engine; steps 3 and 6 resume after them
    assert engine.calls == [
        ("release", everything),
        ("resume", ["weights"]),
        ("resume", ["kv_cache", "cuda_graph"]),
        ("release", everything),
        ("resume", ["weights"]),
        ("resume", ["kv_cache", "cuda_graph"]),
    ]
    # each generation's block: the real releases before it (steps 0-2 in block 0, 3-5 in 1, 6 in 2)
    assert before == [0, 0, 0, 1, 1, 1, 2]


def test_gate_releases_with_tags_and_every_keeps_both_choices():
    """``rollout-relkv-block``: every second release reaches the engine, and then only the KV cache's."""
    engine = RecordingEngine()
    gate_releases(engine, ("kv_cache",), every=2)
    for step in range(3):
        _manager_step(engine, released=step > 0)
    assert engine.calls == [("release", ["kv_cache"]), ("resume", ["kv_cache"])]


def test_block_levels_groups_generations_by_the_releases_before_them():
    result = {"all_tokens_per_s": [55_300.0, 49_240.0, 61_000.0, 43_040.0], "release_blocks": [0, 0, 1, 2]}
    assert block_levels(result) == "55.3 49.2 | 61.0 | 43.0"


def test_the_table_sets_each_variant_beside_bare_as_measured_and_at_the_same_host_speed():
    def run(variant, pairs):
        generations = [{"tokens_per_s": rate, "probe_ms": probe} for probe, rate in pairs]
        rate = sorted(g["tokens_per_s"] for g in generations)[1]
        return {"variant": variant, "rc": 0, "tokens_per_s": rate, "generations": generations, "wall_s": 1.0}

    # the rollout makes 80 tok/s per 1/ms of probe time, bare 100, but the rollout's host ran twice as slow
    bare = run("bare", [(p, 100 / p) for p in (1.0, 1.1, 1.2)])
    rollout = run("rollout", [(p, 80 / p) for p in (2.0, 2.2, 2.4)])
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in table([bare, rollout]).splitlines()}
    # (80 / 2.2) / (100 / 1.1); then matched, exact points leaving no room for an interval
    assert rows["rollout"][3:5] == ["0.40", "0.80 (95% 0.80-0.80, slope -1.00)"]
    assert rows["bare"][3:5] == ["1.00", "1.00 (95% 1.00-1.00, slope -1.00)"]
