"""Ulysses sequence parallelism on 2 GPUs: one actor update on 16k- and 32k-token sequences, SP=2 against SP=1.

The model is Qwen2.5-0.5B-shaped (14 query / 2 KV heads, 24 layers, vocabulary 151,936) with random weights built
from the config below, written once to a temporary folder. Each case is one ``torchrun --nproc_per_node=2`` run of
this module in ``--worker`` mode: FSDP2 over both GPUs (fp32 master weights, bf16 compute), remove-padding,
gradient checkpointing, AdamW; the global batch is 2 sequences of ``L`` tokens (1,024 prompt + ``L - 1024``
response), one per micro-batch. With SP=1 each GPU runs one whole sequence (data parallel); with SP=2 both GPUs
run each sequence, half of its tokens each (two micro-batches). Same batch, same update; only the split differs.

Per case: one warm-up update, then ``--repeats`` timed updates; peak allocated/reserved memory per GPU (the larger
of the two ranks, over the timed updates) and tokens/s over both GPUs. A rank that runs out of memory reports it
and exits, which ends the case as OOM. The launcher prints the table with SP=2 / SP=1 ratios for each length and
writes it as markdown with ``--out``.

Usage (on a machine with 2 GPUs)::

    python -m benchmarks.bench_ulysses --out benchmarks/results/ulysses_h100x2.md
    # one case by hand:
    torchrun --standalone --nproc_per_node=2 -m benchmarks.bench_ulysses --worker --model-dir DIR --seq-len 32768 --sp 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QWEN2_5_0_5B = {  # Qwen/Qwen2.5-0.5B-Instruct's config.json, longer context
    "model_type": "qwen2",
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 65536,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "use_sliding_window": False,
}
PROMPT_TOKENS = 1024
SEQUENCES = 2


def build_model(folder: Path) -> None:
    """Random Qwen2.5-0.5B-shaped weights saved as a Hugging Face folder."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**QWEN2_5_0_5B)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).save_pretrained(folder, safe_serialization=True)


def _batch(seq_len: int, vocab_size: int):
    import torch

    from verl.protocol import DataProto

    gen = torch.Generator().manual_seed(seq_len)
    input_ids = torch.randint(0, vocab_size, (SEQUENCES, seq_len), generator=gen)
    attention_mask = torch.ones_like(input_ids)
    prompt = min(PROMPT_TOKENS, seq_len // 2)
    response = seq_len - prompt
    tensors = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": torch.arange(seq_len).expand(SEQUENCES, seq_len).clone(),
        "responses": input_ids[:, prompt:],
        "response_mask": torch.ones(SEQUENCES, response, dtype=torch.long),
        "old_log_probs": -12.0 + 0.1 * torch.randn(SEQUENCES, response, generator=gen),
        "advantages": torch.randn(SEQUENCES, response, generator=gen),
    }
    return DataProto.from_dict(tensors=tensors, meta_info={"temperature": 1.0})


def _worker_case(model_dir: str, seq_len: int, sp: int, repeats: int) -> dict:
    import torch
    import torch.distributed as dist

    from verl.utils.device import get_torch_device
    from verl.workers.actor import DataParallelPPOActor
    from verl.workers.actor.role_utils import max_memory_allocated_gb
    from verl.workers.config import FSDPActorConfig, FSDPEngineConfig, HFModelConfig, OptimConfig
    from verl.workers.engine.fsdp.engine import FSDPEngine

    world = dist.get_world_size()
    optim = OptimConfig(lr=1e-6)
    model_config = HFModelConfig(path=model_dir, use_remove_padding=True, enable_gradient_checkpointing=True)
    engine = FSDPEngine(model_config, FSDPEngineConfig(), optim, role="actor", ulysses_sequence_parallel_size=sp)
    engine.initialize()
    dp = world // sp
    config = FSDPActorConfig(
        ppo_mini_batch_size=SEQUENCES // dp,
        ppo_micro_batch_size_per_gpu=1,
        ulysses_sequence_parallel_size=sp,
        optim=optim,
    )
    actor = DataParallelPPOActor(
        config, engine.module, engine.optimizer, use_remove_padding=True, ulysses=engine.ulysses
    )
    data = _batch(seq_len, engine.hf_config().vocab_size).chunk(dp)[engine.dp_rank]
    actor.update_policy(data)  # warm-up: kernels, allocator, optimizer state
    cuda = torch.cuda.is_available()
    get_torch_device().synchronize()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(repeats):
        actor.update_policy(data)
    get_torch_device().synchronize()
    dist.barrier()
    seconds = (time.perf_counter() - start) / repeats
    return {  # on CPU (a smoke run) the peak resident set size of the process stands for both
        "peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else max_memory_allocated_gb() / 1.074,
        "peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30 if cuda else max_memory_allocated_gb() / 1.074,
        "seconds_per_update": seconds,
        "tokens_per_s": SEQUENCES * seq_len / seconds,
        "attn_implementation": engine.hf_config()._attn_implementation,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
    }


def worker(args: argparse.Namespace) -> None:
    """One case on the torchrun world; writes ``rank<R>.json`` into ``--result-dir``."""
    import torch
    import torch.distributed as dist

    from verl.utils.device import get_nccl_backend

    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(get_nccl_backend())
    rank = dist.get_rank()
    out = Path(args.result_dir or tempfile.gettempdir()) / f"rank{rank}.json"
    try:
        result = {"status": "ok", **_worker_case(args.model_dir, args.seq_len, args.sp, args.repeats)}
    except torch.cuda.OutOfMemoryError as error:
        # the peer is blocked in a collective this rank will never join: report and leave, torchrun ends the case
        out.write_text(json.dumps({"status": "OOM", "error": str(error).splitlines()[0]}))
        sys.stdout.flush()
        os._exit(3)
    out.write_text(json.dumps(result))
    print(f"rank {rank}: {json.dumps(result)}", flush=True)
    dist.destroy_process_group()


def run_case(model_dir: Path, seq_len: int, sp: int, repeats: int, timeout: int) -> dict:
    with tempfile.TemporaryDirectory() as result_dir:
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            "-m", "benchmarks.bench_ulysses", "--worker", "--model-dir", str(model_dir), "--seq-len", str(seq_len),
            "--sp", str(sp), "--repeats", str(repeats), "--result-dir", result_dir,
        ]  # fmt: skip
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"status": f"timeout after {timeout} s"}
        ranks = [json.loads(p.read_text()) for p in sorted(Path(result_dir).glob("rank*.json"))]
    if any(r["status"] == "OOM" for r in ranks):
        return {"status": "OOM", "error": next(r["error"] for r in ranks if r["status"] == "OOM")}
    if proc.returncode != 0 or len(ranks) != 2:
        return {"status": f"failed (exit {proc.returncode})", "error": proc.stderr[-2000:]}
    return {
        "status": "ok",
        "peak_allocated_gib": max(r["peak_allocated_gib"] for r in ranks),
        "peak_reserved_gib": max(r["peak_reserved_gib"] for r in ranks),
        "seconds_per_update": max(r["seconds_per_update"] for r in ranks),
        "tokens_per_s": min(r["tokens_per_s"] for r in ranks),
        "attn_implementation": ranks[0]["attn_implementation"],
        "device": ranks[0]["device"],
    }


def _cell(result: dict, key: str, fmt: str) -> str:
    return format(result[key], fmt) if result["status"] == "ok" else result["status"]


def _ratio(a: dict, b: dict, key: str) -> str:
    if a["status"] != "ok" or b["status"] != "ok":
        return "-"
    return f"{a[key] / b[key]:.2f}"


def report(results: dict[tuple[int, int], dict], lengths: list[int]) -> str:
    lines = [
        "| tokens / sequence | SP | peak alloc. GiB / GPU | peak reserved GiB / GPU | s / update | tokens/s (2 GPUs) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for seq_len in lengths:
        for sp in (1, 2):
            r = results[(seq_len, sp)]
            memory = f"{_cell(r, 'peak_allocated_gib', '.2f')} | {_cell(r, 'peak_reserved_gib', '.2f')}"
            speed = f"{_cell(r, 'seconds_per_update', '.2f')} | {_cell(r, 'tokens_per_s', ',.0f')}"
            lines.append(f"| {seq_len} | {sp} | {memory} | {speed} |")
    lines += ["", "| tokens / sequence | peak allocated SP2/SP1 | tokens/s SP2/SP1 |", "| --- | --- | --- |"]
    for seq_len in lengths:
        sp1, sp2 = results[(seq_len, 1)], results[(seq_len, 2)]
        lines.append(f"| {seq_len} | {_ratio(sp2, sp1, 'peak_allocated_gib')} | {_ratio(sp2, sp1, 'tokens_per_s')} |")
    ok = [r for r in results.values() if r["status"] == "ok"]
    if ok:
        lines += ["", f"Device: {ok[0]['device']} x 2; attention: {ok[0]['attn_implementation']}."]
    failed = {k: r["error"] for k, r in results.items() if r.get("error") and r["status"] != "OOM"}
    for (seq_len, sp), error in failed.items():
        lines += ["", f"seq {seq_len} SP {sp} failed:", "```", error, "```"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help="run one case (under torchrun)")
    parser.add_argument("--model-dir", default=None, help="model folder (default: build one in a temporary folder)")
    parser.add_argument("--seq-len", type=int, nargs="+", default=[16384, 32768])
    parser.add_argument("--sp", type=int, default=2, help="--worker: the case's sequence-parallel size")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--result-dir", default=None)
    parser.add_argument("--timeout", type=int, default=1200, help="seconds per case")
    parser.add_argument("--out", default=None, help="write the markdown table here")
    parser.add_argument("--cpu-smoke", action="store_true", help="run on CPU (gloo) to check the script")
    args = parser.parse_args([] if argv is None else argv)
    if args.worker:
        args.seq_len = args.seq_len[0]
        worker(args)
        return
    import torch

    if torch.cuda.device_count() < 2 and not args.cpu_smoke:
        print(f"bench_ulysses: needs 2 GPUs (torch sees {torch.cuda.device_count()}); skipped")
        return
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = Path(args.model_dir) if args.model_dir else Path(scratch) / "qwen2.5-0.5b-random"
        if not (model_dir / "config.json").exists():
            build_model(model_dir)
        results = {}
        for seq_len in args.seq_len:
            for sp in (1, 2):
                results[(seq_len, sp)] = run_case(model_dir, seq_len, sp, args.repeats, args.timeout)
                print(f"seq {seq_len} sp {sp}: {results[(seq_len, sp)]}", flush=True)
    table = report(results, args.seq_len)
    print(table)
    if args.out:
        Path(args.out).write_text(
            f"# Ulysses SP=2 vs SP=1, one actor update, Qwen2.5-0.5B-shaped random model\n\n"
            f"Command: `python -m benchmarks.bench_ulysses --out {args.out}`\n\n{table}\n"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
