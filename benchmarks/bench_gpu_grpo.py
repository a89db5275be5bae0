"""GPU GRPO benchmark: verl's step with each rollout engine, the bare engines, and TRL, on one GPU in one go.

Workload (issue 14): GSM8K, SmolLM2-135M-Instruct in bf16, 32 prompts x 8 samples x up to 256 response tokens,
one optimizer step per batch, ``--steps`` (6) GRPO steps. Runs, each in its own subprocess (a failure is
recorded and the next run starts):

- ``vllm``, ``sglang``, ``hf``: ``python -m verl.trainer.main_ppo`` with ``rollout.name`` set to the run's name;
- ``standalone-vllm``, ``standalone-sglang``: the bare engine's tokens/s on the same batch
  (:mod:`benchmarks.gpu.standalone_engine`);
- ``trl``: TRL's ``GRPOTrainer`` on the same workload (:mod:`benchmarks.gpu.trl_grpo`).

Reported per verl run (steps 2.. averaged; step 1 holds warm-up): step time, the ``timing_s/*`` breakdown,
generated tokens/s (response tokens / ``timing_s/gen``, and over the engine's own generate call), weight-sync
time, and the peak device memory of each phase, read from NVML every ``--memory-sample-ms`` (100) and cut into
phases from each step's ``timing_s/*`` in the order the trainer runs them (with ``--memory-sample-ms 0``, the
workers' device use as each phase ends: ``perf/device_memory_used_gb/<phase>``). The table compares generation
with the standalone engine and the whole step with TRL. Everything lands in ``--out``: ``results.jsonl`` (per-step
records and summaries), ``table.md`` and ``logs.tar.gz`` (each run's output); the table is printed last.

Usage (on the device machine, after ``benchmarks/gpu/stage.sh``'s install; see benchmarks/results/NOTES_gpu.md)::

    python -m benchmarks.bench_gpu_grpo --out $OUT --data .carry_gpu14/data [--runs vllm,sglang,hf,trl,...]
        [--steps 6] [--training fast|plain] [--override actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=32 ...]
        [--runs sglang,sglang@eager --variant eager=actor_rollout_ref.actor.use_torch_compile=False,...]
        [--lanes "0=vllm,standalone-vllm;1=sglang,standalone-sglang;2=hf;3=trl"]

``--lanes`` spreads the runs over the GPUs of a multi-GPU machine, one lane per GPU, all lanes at once, each lane's
runs one after the other on its GPU alone (``CUDA_VISIBLE_DEVICES``), so that a table that takes longer than one
device call sequentially still comes out of one call and one command. Put an engine's loop run and its standalone
run in the same lane: that ratio is then measured on one card.

A run listed again as ``NAME#2`` (``--runs standalone-sglang,sglang,standalone-sglang#2``) measures the same setup
later in the call; the table pools a bare engine's runs and sets the loop against each
(:mod:`benchmarks.gpu.grpo_table`).

A run cut at ``--timeout`` is killed with its whole process tree. Without ``--lanes``, each run's start line prints
the GPU memory already in use, and after each run every engine process left on the machine (Ray, SGLang, vLLM,
``main_ppo``) is killed (:mod:`benchmarks.gpu.leftovers`): run it on a machine of its own.

Diagnostics: ``--gpu-monitor`` logs ``nvidia-smi pmon``/``dmon`` and ``top`` once a second beside each verl run and
each bare engine, every thread's CPU time with the VM's steal every 0.25 s (:mod:`benchmarks.gpu.cpu_monitor`; who
used the CPUs during the generation windows of steps 2+ is printed after the run) and the host's speed
(:mod:`benchmarks.gpu.cpu_probe`); the table then also compares the loop's generations with the bare engine's at the
same host speed (:func:`benchmarks.gpu.generation_context.host_matched_ratio`). A run whose variant is named
``pyspy...`` gets ``py-spy record --pid`` (``--py-spy``) attached to its SGLang scheduler and detokenizer and its Ray
workers as each appears (:class:`benchmarks.gpu.pyspy.Attacher`), writing ``<run>.<process>.<pid>.pyspy.txt``;
``python -m benchmarks.gpu.pyspy summarize FILE`` reads one. A run whose variant is named ``pin...`` (standalone runs
too: ``standalone-sglang@pin``) gets a physical CPU core for its SGLang scheduler alone; ``pinonly...`` moves the
scheduler there but leaves the rest of the run free to use that core (:mod:`benchmarks.gpu.affinity`). A
``nosample...`` run pauses the lane's NVML memory sampler (``--memory-sample-ms``) while it runs, so that one call sets
a setup with the sampler beside it against the same setup without (its phases then have no peaks). A
``profile...`` run profiles its workers' training phases (:mod:`benchmarks.gpu.loop_profile`, into ``<run>.profile/``).

``--random-model hidden_size=512,num_attention_heads=8,num_key_value_heads=2`` runs everything on a random-weight
model derived from SmolLM2 (:mod:`benchmarks.gpu.random_model`): SmolLM2's 9 / 3 heads do not split at TP=2. Its
responses run to 256 tokens each, so its runs compare with each other, not with SmolLM2's. The arguments are parsed
by :mod:`benchmarks.gpu.grpo_args`.

Site directories: ``--site-vllm``/``--site-sglang`` (engine wheels), ``--site-common`` (Ray, Hydra, TRL, ...),
``--site-model`` (the SmolLM2 GGUF package); defaults are where the stage script installs them.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.gpu.generation_context import per_generation, print_rows
from benchmarks.gpu.grpo_args import ALL_RUNS, parse_args, parse_lanes  # noqa: F401 - also read from here
from benchmarks.gpu.grpo_table import (  # noqa: F401 - the constants and _fmt are also read from here
    BREAKDOWN,
    MAX_PROMPT_LENGTH,
    PROMPTS,
    RESPONSE_LENGTH,
    SAMPLES,
    VERL_ENGINES,
    _fmt,
    render_table,
    split_run,
    summarize_verl,
)
from benchmarks.gpu.leftovers import gpu_memory_used_mib, kill_tree, sweep
from benchmarks.gpu.monitors import (  # noqa: F401 - MemorySampler and PHASES are also read from here
    PHASES,
    MemorySampler,
    _phase_peaks,
    _start_gpu_monitors,
    _stop_group,
    cpu_during_generation,
    watched_device,
)
from benchmarks.gpu.random_model import folder_name

REPO = Path(__file__).resolve().parents[1]
FAST_TRAINING = (
    "actor_rollout_ref.model.use_remove_padding=True",
    "actor_rollout_ref.actor.use_dynamic_bsz=True",
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=131072",
    "actor_rollout_ref.actor.use_torch_compile=True",
    "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=131072",
    "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True",
    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=131072",
    "actor_rollout_ref.ref.use_torch_compile=True",
)
"""``--training fast`` (the default): verl's own keys for packed sequences (varlen attention), micro-batches by a
128k-token budget (the step's ~85k tokens in one micro-batch: on one H100 in session 14, with the ``padded_flash``
kernel, the reference pass took 0.20 s and the update 0.59 s against 0.40 and 1.02 s with two micro-batches of at
most 64k and the cuDNN kernel), and compiled decoder layers and log-prob math, for the actor and the reference.
``plain`` leaves them at their defaults (padded micro-batches of 16/32 sequences, eager)."""


ENV_PREFIX = "env:"


def variant_env(args, variant: str | None) -> dict[str, str]:
    """The environment variables a variant sets for its run: its ``env:NAME=VALUE`` entries (for example
    ``env:RAY_worker_niceness=0``: Ray starts its workers, and so the engines they spawn, at nice 15)."""
    entries = args.variants.get(variant, []) if variant else []
    return dict(e[len(ENV_PREFIX) :].split("=", 1) for e in entries if e.startswith(ENV_PREFIX))


def merge_overrides(*groups) -> list[str]:
    """Overrides of all ``groups`` in order, a later ``key=value`` replacing an earlier one of the same key (Hydra
    refuses a key given twice)."""
    merged: dict[str, str] = {}
    for group in groups:
        for override in group:
            merged[override.split("=", 1)[0]] = override
    return list(merged.values())


def workload_overrides(args, engine: str, variant: str | None = None) -> list[str]:
    """``main_ppo`` overrides of the benchmark workload for ``rollout.name=engine``, then ``--training``'s, then
    ``--override``s, then ``variant``'s (``--variant NAME=key=value,key=value``); later keys win. A variant's
    ``env:NAME=VALUE`` entries are environment variables of the run (:func:`variant_env`), not overrides."""
    data = Path(args.data)
    overrides = [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={data / 'train.parquet'}",
        f"data.val_files={data / 'test.parquet'}",
        f"data.train_batch_size={PROMPTS}",
        f"data.max_prompt_length={MAX_PROMPT_LENGTH}",
        f"data.max_response_length={RESPONSE_LENGTH}",
        "data.filter_overlong_prompts=True",
        f"actor_rollout_ref.model.path={args.model}",
        "actor_rollout_ref.model.enable_gradient_checkpointing=False",  # a 135M model: nothing to save, recompute costs
        "actor_rollout_ref.actor.optim.lr=1e-6",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={PROMPTS}",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        f"actor_rollout_ref.rollout.name={engine}",
        f"actor_rollout_ref.rollout.n={SAMPLES}",
        "actor_rollout_ref.rollout.temperature=1.0",
        "actor_rollout_ref.rollout.dtype=bfloat16",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={args.gpu_memory_utilization}",
        "actor_rollout_ref.rollout.enforce_eager=False",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=32",
        "trainer.logger=[console,file]",
        "trainer.project_name=bench_gpu_grpo",
        f"trainer.experiment_name={engine}",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        "trainer.device=cuda",
        f"trainer.total_training_steps={args.steps}",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
    ]
    training = FAST_TRAINING if args.training == "fast" else ()
    extra = [o for o in args.variants.get(variant, []) if not o.startswith(ENV_PREFIX)] if variant else []
    return merge_overrides(overrides, training, args.override, extra)


def _site_path(args, engine: str | None) -> str:
    parts = []
    if engine == "vllm":
        parts.append(args.site_vllm)
    elif engine == "sglang":
        parts.append(args.site_sglang)
    parts += [args.site_common, args.site_model, str(REPO)]
    return os.pathsep.join(p for p in parts if p)


def _run_command(
    name: str,
    command: list[str],
    env: dict,
    log_path: Path,
    timeout: float,
    on_line=None,
    kill: Callable[[subprocess.Popen], None] = subprocess.Popen.kill,
    on_start: Callable[[subprocess.Popen], None] | None = None,
    preexec: Callable[[], None] | None = None,
) -> int:
    """Run ``command``, teeing its output to ``log_path``; ``on_start(process)`` sees it started, ``on_line(line,
    time)`` every stdout line, ``preexec`` runs in the child before it executes (``Popen``'s ``preexec_fn``). Past
    ``timeout`` seconds ``kill(process)`` stops it and 124 is returned."""
    with open(log_path, "w") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
            preexec_fn=preexec,
        )  # fmt: skip
        if on_start is not None:
            on_start(process)
        deadline = time.monotonic() + timeout
        timer = threading.Timer(timeout, kill, args=(process,))
        timer.start()
        try:
            for line in process.stdout:
                log.write(line)
                if on_line is not None:
                    on_line(line, time.perf_counter())
            process.wait()
        finally:
            timer.cancel()
        if time.monotonic() > deadline:
            log.write(f"\n[bench] {name}: killed after {timeout:.0f} s\n")
            return 124
        return process.returncode


def missing_engine(engine: str, env: dict) -> str | None:
    """Why ``main_ppo`` would not get rollout ``engine`` under ``env`` (None when it would). ``main_ppo`` swaps a
    missing vLLM for the HF rollout with one printed line, so a run of the wrong engine would report its numbers
    as vLLM's: session 5's first VLM runs did (no weight sync, no sleep, no placeholder ban)."""
    if engine not in ("vllm", "sglang"):
        return None
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({engine!r}) is None)"
    found = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, timeout=120)
    if found.returncode == 0:
        return None
    return f"{engine} is not importable with PYTHONPATH={env.get('PYTHONPATH', '')!r}: pass its site (--site-{engine})"


def run_verl(
    args,
    name: str,
    out: Path,
    sampler: MemorySampler | None,
    overrides: list[str] | None = None,
    engine: str | None = None,
    gpu: str | None = None,
) -> list[dict]:
    """One ``main_ppo`` run (``name`` = ``engine[@variant]``) with ``overrides`` (default: this benchmark's
    workload); returns its per-step records (the file logger's metrics, plus phase memory when ``sampler``).
    ``engine`` names the rollout engine whose site goes on the path when ``name`` is not an engine's (a run of
    another benchmark); a vLLM or SGLang run whose engine is not importable is recorded as an error unrun. ``gpu``
    (a lane's GPU) becomes the run's ``CUDA_VISIBLE_DEVICES``."""
    run_engine, variant = split_run(name)
    engine = engine or run_engine
    metrics_path = out / f"{name}.metrics.jsonl"
    metrics_path.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=_site_path(args, engine), VERL_FILE_LOGGER_PATH=str(metrics_path))
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    if hasattr(args, "variants"):  # vlm_grpo's args have none
        env.update(variant_env(args, variant))
    if variant is not None and variant.startswith("profile"):  # benchmarks.gpu.loop_profile inside the workers
        env.update(VERL_WORKER_SETUP_HOOKS="benchmarks.gpu.loop_profile.install",
                   VERL_LOOP_PROFILE_DIR=str(out / f"{name}.profile"))  # fmt: skip
    if (missing := missing_engine(engine, env)) is not None:
        return [{"run": name, "error": missing}]
    env.update(VERL_CACHE_DIR=args.cache_dir, VLLM_ENABLE_V1_MULTIPROCESSING="0", PYTHONUNBUFFERED="1")
    if overrides is None:
        overrides = workload_overrides(args, engine, variant)
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *overrides]
    attachers = []
    pin = _pinning(variant)

    def attach(process: subprocess.Popen) -> None:
        if variant is not None and variant.startswith("pyspy"):
            from benchmarks.gpu.pyspy import Attacher

            attachers.append(Attacher(args.py_spy, process.pid, out / name).start())
        if pin is not None:
            pin.attach(process)

    arrivals: dict[int, float] = {}
    done = threading.Event()

    def watch() -> None:  # a step's metrics line lands in the file when the step ends: note when each appears
        seen = 0
        while not done.is_set():
            if metrics_path.exists():
                count = metrics_path.read_bytes().count(b"\n")
                now = time.perf_counter()
                for index in range(seen, count):
                    arrivals[index] = now
                seen = count
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    watched = getattr(args, "gpu_monitor", False)  # vlm_grpo's args have no --gpu-monitor
    monitors = _start_gpu_monitors(out, name, watched_device(gpu)) if watched else []
    try:
        rc = _run_command(
            name,
            command,
            env,
            out / f"{name}.log",
            args.timeout,
            on_start=attach,
            preexec=pin and pin.preexec,
            kill=kill_tree,
        )
    finally:
        pinned = pin.stop() if pin is not None else {}
        for attacher in attachers:
            attacher.stop()
        done.set()
        watcher.join()
        for monitor in monitors:
            _stop_group(monitor)
    records = []
    if metrics_path.exists():
        for index, line in enumerate(metrics_path.read_text().splitlines()):
            entry = json.loads(line)
            record = {"run": name, "step": entry["step"], **entry["data"], **pinned}
            if index in arrivals and sampler is not None:
                record.update(_phase_peaks(record, arrivals[index], sampler))
            records.append(record)
    if monitors and (rows := cpu_during_generation(out, name, records, arrivals, sequences=PROMPTS * SAMPLES)):
        records.append({"run": name, "generations": rows})  # the table's host-matched ratio (grpo_table)
    if rc != 0:
        records.append({"run": name, "error": f"exit status {rc}; see {name}.log in logs.tar.gz"})
    return records


def _pinning(variant: str | None):
    """A :class:`benchmarks.gpu.affinity.RunPin` for a ``pin*`` variant's run (its SGLang scheduler gets a physical
    core of its own; ``pinonly*``: the rest of the run is not kept off it), else None."""
    if variant is None or not variant.startswith("pin"):
        return None
    from benchmarks.gpu.affinity import RunPin

    return RunPin(isolate=not variant.startswith("pinonly"))


def json_run_env(args, name: str, engine: str | None, gpu: str | None) -> dict[str, str]:
    """The environment of a standalone engine's or TRL's run: the engine's site, the run's variant, and the bare
    engine's own defaults except two that only change what it does at start-up or which runner it uses."""
    env = dict(os.environ, PYTHONPATH=_site_path(args, engine), VERL_CACHE_DIR=args.cache_dir, PYTHONUNBUFFERED="1")
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)  # the bare engine runs with its own defaults, except:
    # (a variant may still set it: `standalone-vllm@inproc` with `env:VLLM_ENABLE_V1_MULTIPROCESSING=0` runs the
    # bare engine in one process, as the loop's engine does)
    env.update(variant_env(args, split_run(name)[1]))
    env.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")  # the runner the hybrid engine uses (vllm_rollout.py says why)
    # vLLM's start-up warms its sampler with dummy top-k/top-p requests; on CUDA those go to FlashInfer's sampling
    # kernels, which FlashInfer builds (JIT) on first use. Session 15's cold bare engine (H100) spent 115 of its 162 s
    # start in that warm-up; the loop's engine, which never uses FlashInfer's sampler (its logprobs_mode is
    # processed_logprobs), spent 10 s there. The benchmark's requests set neither top-k nor top-p, and vLLM then
    # samples natively either way, so this changes only the start-up.
    env.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
    return env


def run_json_lines(
    args, name: str, module: str, extra: list[str], engine: str | None, out: Path, gpu: str | None = None
) -> list[dict]:
    """A benchmark script that prints JSON lines (standalone engine, TRL); returns those lines. A run named
    ``...@variant`` gets the variant's environment and pinning."""
    env = json_run_env(args, name, engine, gpu)
    pin = _pinning(split_run(name)[1])
    command = [sys.executable, "-m", module, "--model", args.model, "--data", str(Path(args.data) / "train.parquet")]
    records: list[dict] = []

    def collect(line: str, _now: float) -> None:
        if line.startswith("{"):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                pass

    try:
        rc = _run_command(
            name, command + extra, env, out / f"{name}.log", args.timeout, on_line=collect,
            on_start=pin and pin.attach, preexec=pin and pin.preexec, kill=kill_tree,
        )  # fmt: skip
    finally:
        pinned = pin.stop() if pin is not None else {}
    for record in records:
        record.update(pinned)
    if rc != 0:
        records.append({"run": name, "error": f"exit status {rc}; see {name}.log in logs.tar.gz"})
    return records


def run_one(args, name: str, out: Path, sampler: MemorySampler | None, gpu: str | None) -> tuple[list[dict], dict]:
    """One run of the table (a verl engine, a standalone engine or TRL) on ``gpu``: its records and summary."""
    begin = time.perf_counter()
    # one lane (gpu None): nothing else of this call should be on the card now; say what is (sessions 13-14)
    held = "" if gpu is not None else f", GPU memory in use {gpu_memory_used_mib()} MiB"
    print(f"[bench] {name}: start" + (f" on GPU {gpu}" if gpu is not None else "") + held, flush=True)
    variant = split_run(name)[1] or ""
    if sampler is not None and variant.startswith("nosample"):  # the same run without NVML queries beside it
        with sampler.paused():
            return run_one(args, name, out, None, gpu)
    first_query = len(sampler.query_s) if sampler is not None else 0
    if split_run(name)[0] in VERL_ENGINES:
        records = run_verl(args, name, out, sampler, gpu=gpu)
        summary = summarize_verl(records)
        summary.update(next((r for r in records if "generations" in r and "step" not in r), {}))
    elif name.startswith("standalone-"):
        engine = split_run(name)[0].split("-", 1)[1]
        extra = ["--engine", engine, "--gpu-memory-utilization", str(args.gpu_memory_utilization)]
        extra += ["--repeats", str(args.standalone_repeats)]
        monitors = _start_gpu_monitors(out, name, watched_device(gpu)) if args.gpu_monitor else []
        try:
            records = run_json_lines(args, name, "benchmarks.gpu.standalone_engine", extra, engine, out, gpu)
        finally:
            for monitor in monitors:
                _stop_group(monitor)
        summary = next((dict(r) for r in records if "tokens_per_s" in r), {})
        if monitors and summary.get("windows"):  # its generations beside the machine, as the loop's steps
            summary["generations"] = per_generation(out, name, summary)
            print_rows(name, summary["generations"])
    else:
        extra = ["--steps", str(args.steps)]
        records = run_json_lines(args, name, "benchmarks.gpu.trl_grpo", extra, None, out, gpu)
        summary = next((dict(r) for r in records if r.get("summary")), {})
    errors = [r["error"] for r in records if "error" in r]
    if errors:
        summary["error"] = errors[-1]
    summary.update(run=name, wall_s=time.perf_counter() - begin)
    if sampler is not None:
        summary.update(sampler.query_ms(first_query))
    if gpu is not None:
        summary["gpu"] = gpu
    else:  # one lane: what this run left behind would crowd the next one
        leftovers = sweep()
        if leftovers:
            print(f"[bench] {name}: killed {len(leftovers)} leftover processes: {leftovers}", flush=True)
        summary["leftovers_killed"] = len(leftovers)
    return records, summary


def in_run_order(summaries: dict[str, dict], runs: list[str]) -> dict[str, dict]:
    """The finished runs' summaries in the order ``--runs`` gave them (lanes finish in any order)."""
    return {name: summaries[name] for name in runs if name in summaries}


def _card() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception as exc:  # the table still renders without NVML
        return f"unknown GPU ({exc})"


def prepare_model(args) -> str:
    """``--model``, else SmolLM2 converted from the staged GGUF once (into ``--cache-dir``); with ``--random-model``,
    a random-weight model derived from it (:mod:`benchmarks.gpu.random_model`, written once)."""
    env = dict(os.environ, PYTHONPATH=_site_path(args, None), VERL_CACHE_DIR=args.cache_dir)

    def step(*argv: str) -> str:  # a subprocess: the site paths hold transformers, this process may not
        result = subprocess.run([sys.executable, *argv], env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise RuntimeError(f"model preparation failed ({argv[1]}):\n{result.stderr[-3000:]}")
        return result.stdout.strip().splitlines()[-1]

    model = args.model or step("-c", "from verl.utils.default_model import default_model_path as p; print(p())")
    if args.random_model:
        target = Path(args.cache_dir) / "models" / folder_name(model, args.random_fields)
        model = step("-m", "benchmarks.gpu.random_model", model, str(target), *args.random_model)
    return model


def main(argv: list[str] | None = None) -> int:
    import torch

    if not torch.cuda.is_available():  # before parsing: `make bench` calls every benchmark's main() on CPU
        print("bench_gpu_grpo: no CUDA device, skipped (run it on a GPU machine; see benchmarks/results/NOTES_gpu.md)")
        return 0
    args, lanes, runs = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    args.model = prepare_model(args)
    print(f"[bench] model {args.model} ready after {time.perf_counter() - started:.1f} s", flush=True)
    summaries: dict[str, dict] = {}
    card = _card()
    results_path = out / "results.jsonl"
    write_lock = threading.Lock()
    with open(results_path, "a") as results:

        def lane(gpu: str | None, names: list[str]) -> None:
            sampling = (
                MemorySampler(args.memory_sample_ms / 1000, device=gpu)
                if args.memory_sample_ms > 0
                else contextlib.nullcontext()
            )
            with sampling as sampler:
                for name in names:
                    records, summary = run_one(args, name, out, sampler, gpu)
                    with write_lock:
                        summaries[name] = summary
                        for record in records:
                            results.write(json.dumps(record) + "\n")
                        results.write(json.dumps({"summary": True, **summary}) + "\n")
                        results.flush()
                        shown = {k: v for k, v in summary.items() if k not in ("generations", "windows")}
                        print(f"[bench] {name}: {json.dumps(shown)}", flush=True)
                        # after every run, so that a call cut by its limit still brings back the finished runs' table
                        (out / "table.md").write_text(render_table(in_run_order(summaries, runs), card))

        threads = [threading.Thread(target=lane, args=(gpu, names), daemon=True) for gpu, names in lanes.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    summaries = in_run_order(summaries, runs)
    with tarfile.open(out / "logs.tar.gz", "w:gz") as archive:
        patterns = ("*.log", "*.metrics.jsonl", "*.pyspy.txt*", "*.cpu.jsonl", "*.probe.jsonl", "*.profile/*")
        for log in sorted({path for pattern in patterns for path in out.glob(pattern)}):
            archive.add(log, arcname=str(log.relative_to(out)))
            log.unlink()
    table = render_table(summaries, card)
    (out / "table.md").write_text(table)
    print(f"[bench] total {time.perf_counter() - started:.0f} s\n")
    print(table, flush=True)
    return 0 if all("error" not in s for s in summaries.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
