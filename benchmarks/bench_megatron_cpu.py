"""FSDP2 vs the Megatron engine (TP=2) on 2 gloo ranks (CPU): log-probs and one PPO update of the same batch.

The CPU counterpart of ``bench_megatron_vs_fsdp`` (GPU) for the workload of the GRPO comparison in issue 16:
packed sequences, micro-batches by a token budget (``use_dynamic_bsz``), KL loss. FSDP2 is data parallel over
both ranks (each holds half the rows); Megatron TP=2 has one data-parallel rank, so each rank runs every row
through half of every layer. The budget is set so that, as on the GPUs (85k tokens, 64k budget), FSDP2 runs one
micro-batch per rank and Megatron two.

Per engine (rank 0): seconds of ``compute_log_prob`` (with entropy) and of ``update_policy`` (best of
``--repeats`` after a warm-up), the micro-batches (rows, valid tokens, tokens fed to the model), the peak resident
memory above the level before the call (glibc hands big blocks back: ``MALLOC_MMAP_THRESHOLD_``), the ratios to
FSDP2 and the largest |log-prob - FSDP2's|. ``--profile`` adds the update's top operators (torch.profiler). Last,
the host cost of a per-sequence attention loop (what the Megatron attention ran on GPUs without ``flash_attn``).

    python -m benchmarks.bench_megatron_cpu                      # tiny Llama with SmolLM2's 49k vocabulary
    python -m benchmarks.bench_megatron_cpu --model smollm2 --sequences 8 --profile
"""

from __future__ import annotations

import argparse
import gc
import os
import threading
import time

import torch

PROMPT, RESPONSE = 64, 64


def batch(sequences: int, seed: int = 0, vocab: int = 49152) -> dict[str, torch.Tensor]:
    """Rollout-layout batch (prompts of 32-64 tokens, responses of 8-64) with old/ref log-probs and advantages."""
    from benchmarks.bench_megatron_vs_fsdp import rollout_update_batch

    return rollout_update_batch(sequences, PROMPT, RESPONSE, PROMPT // 2, 8, seed, vocab)


class PeakRss:
    """Highest resident set size (bytes) seen while the block runs, sampled every millisecond, minus the start."""

    def __enter__(self):
        self.start = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())

    @property
    def delta(self) -> int:
        return self.peak - self.start

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _sample(self):
        while not self._stop.wait(0.001):
            self.peak = max(self.peak, self._rss())


def _config(sequences: int, dp: int, budget: int):
    from benchmarks.bench_megatron_vs_fsdp import update_actor_config

    return update_actor_config(sequences, dp, budget)


def _build(name: str, path: str, sequences: int, budget: int):
    from verl.workers.config import FSDPEngineConfig, HFModelConfig, McoreEngineConfig, OptimConfig

    if name == "fsdp2":
        from verl.workers.actor import DataParallelPPOActor
        from verl.workers.engine.fsdp.engine import FSDPEngine

        model_config = HFModelConfig(path=path, use_remove_padding=True, enable_gradient_checkpointing=False)
        engine = FSDPEngine(model_config, FSDPEngineConfig(), OptimConfig(lr=1e-6), role="actor").initialize()
        config = _config(sequences, engine.dp_size, budget)
        return engine, DataParallelPPOActor(config, engine.module, engine.optimizer)
    from tests.workers.engine.megatron.helpers import reset_parallel_state
    from verl.workers.actor.megatron_actor import MegatronPPOActor
    from verl.workers.engine.megatron.engine import MegatronEngine

    reset_parallel_state()
    model_config = HFModelConfig(path=path, enable_gradient_checkpointing=False)
    engine_config = McoreEngineConfig(tensor_model_parallel_size=2, sequence_parallel=False)  # SP needs CUDA
    engine = MegatronEngine(model_config, engine_config, OptimConfig(lr=1e-6), role="actor").initialize()
    return engine, MegatronPPOActor(_config(sequences, engine.dp_size, budget), engine)


def _record_plans(module) -> list:
    """Wrap ``module.plan_micro_batches``; returns the list each plan's micro-batch shapes are appended to."""
    plans: list = []
    plan_fn = module.plan_micro_batches

    def recording(*args, **kwargs):
        plan = plan_fn(*args, **kwargs)
        plans.append([(mb["attention_mask"].shape[0], int(mb["attention_mask"].sum())) for mb in plan.micro_batches])
        return plan

    module.plan_micro_batches = recording
    return plans


def _timed(fn, repeats: int):
    """``(best seconds, peak RSS delta bytes, last result)`` of ``fn`` after one warm-up call."""
    result, best, peak = fn(), float("inf"), 0
    for _ in range(repeats):
        gc.collect()
        with PeakRss() as rss:
            start = time.perf_counter()
            result = fn()
            best = min(best, time.perf_counter() - start)
        peak = max(peak, rss.delta)
    return best, peak, result


def _top_ops(fn, rows: int = 12) -> str:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows, max_name_column_width=48)


def _measure(name: str, path: str, tensors, budget: int, repeats: int, profile_update: bool) -> dict:
    from verl.protocol import DataProto

    engine, actor = _build(name, path, tensors["input_ids"].shape[0], budget)
    data = DataProto.from_dict(tensors=tensors, meta_info={"temperature": 1.0}).chunk(engine.dp_size)[engine.dp_rank]
    data.meta_info.update(micro_batch_size=None, use_dynamic_bsz=True, max_token_len=budget)
    log_prob_s, log_prob_mem, (log_probs, _) = _timed(lambda: actor.compute_log_prob(data, True), repeats)
    update_s, update_mem, _ = _timed(lambda: actor.update_policy(data), repeats)
    return {
        "log_prob_s": log_prob_s,
        "update_s": update_s,
        "log_prob_mib": log_prob_mem / 2**20,
        "update_mib": update_mem / 2**20,
        "log_probs": log_probs,
        "dp_rank": engine.dp_rank,
        "collect": getattr(engine, "is_collect_rank", True),
        "profile": _top_ops(lambda: actor.update_policy(data)) if profile_update else "",
    }


def _rank(rank, world, path, tensors, budget, repeats, profile_update):
    import verl.workers.actor.dp_actor as dp_actor
    import verl.workers.actor.megatron_actor as megatron_actor

    torch.set_num_threads(1)
    plans = {"fsdp2": _record_plans(dp_actor), "megatron-tp2": _record_plans(megatron_actor)}
    out = {}
    for name in ("fsdp2", "megatron-tp2"):
        gc.collect()
        out[name] = _measure(name, path, tensors, budget, repeats, profile_update)  # collectives: every rank
        out[name]["micro_batches"] = plans[name][-1]  # the update's plan
    return out


def attention_loop_host_ms(sequences: int = 128, repeats: int = 10) -> tuple[float, float]:
    """Host milliseconds of one layer's per-sequence sdpa loop (forward, forward + backward) over ``sequences``
    one-token sequences: the per-call cost a GPU run pays when attention is not one varlen kernel call (the
    Megatron attention's fallback before this fix; 128 sequences = a GRPO micro-batch of the issue-16 run)."""
    from verl.workers.engine.fsdp.attention import _cpu_varlen

    cu_seqlens = torch.arange(sequences + 1, dtype=torch.int32)
    q, k, v = (torch.randn(sequences, h, 64, requires_grad=True) for h in (6, 2, 2))  # SmolLM2 TP=2 local heads
    for _ in range(2):
        _cpu_varlen(q, k, v, cu_seqlens, 0.125).sum().backward()
    start = time.perf_counter()
    for _ in range(repeats):
        _cpu_varlen(q, k, v, cu_seqlens, 0.125).sum().backward()
    both = (time.perf_counter() - start) / repeats
    with torch.no_grad():
        start = time.perf_counter()
        for _ in range(repeats):
            _cpu_varlen(q, k, v, cu_seqlens, 0.125)
        forward = (time.perf_counter() - start) / repeats
    return forward * 1e3, both * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["tiny", "smollm2"], default="tiny")
    parser.add_argument("--sequences", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="print the update's top operators (rank 0)")
    args = parser.parse_args()
    # big tensors from mmap, so that freeing them lowers the resident size the sampler reads
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(1 << 20))
    from tests.support.models import smollm2_path, tiny_model_path, tp_padded_model_path
    from tests.workers.engine.fsdp.distributed import run_on_ranks

    path = tiny_model_path(num_layers=4, hidden_size=128) if args.model == "tiny" else smollm2_path()
    path = tp_padded_model_path(path, 2)
    tensors = batch(args.sequences)
    total = int(tensors["attention_mask"].sum())
    budget = (total * 3) // 4  # FSDP2: ~total / 2 per rank, one micro-batch; Megatron (dp=1): two
    per_rank = run_on_ranks(_rank, 2, path, tensors, budget, args.repeats, args.profile)
    print(f"{args.model}: {args.sequences} sequences, {total} tokens, budget {budget} tokens per micro-batch, CPU x 2")
    print(
        "| engine | micro-batches (rows/tokens), rank 0 | log_prob s | update s | update / fsdp2 | "
        "log_prob peak MiB | update peak MiB | max |lp - fsdp2| |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    mask = tensors["response_mask"].bool()
    baseline = None
    for name in ("fsdp2", "megatron-tp2"):
        results = [r[name] for r in per_rank]
        collected = sorted((r for r in results if r["collect"]), key=lambda r: r["dp_rank"])
        log_probs = torch.cat([r["log_probs"] for r in collected])
        update_s = max(r["update_s"] for r in results)
        if baseline is None:
            baseline = (update_s, log_probs)
        diff = (log_probs[mask] - baseline[1][mask]).abs().max()
        mbs = " ".join(f"{rows}/{tokens}" for rows, tokens in results[0]["micro_batches"])
        print(
            f"| {name} | {mbs} | {max(r['log_prob_s'] for r in results):.3f} | {update_s:.3f} | "
            f"{update_s / baseline[0]:.2f} | {max(r['log_prob_mib'] for r in results):.0f} | "
            f"{max(r['update_mib'] for r in results):.0f} | {diff:.2e} |"
        )
    torch.set_num_threads(1)
    forward_ms, both_ms = attention_loop_host_ms()
    print(
        f"\nper-sequence attention loop, 128 one-token sequences, one layer, host: forward {forward_ms:.2f} ms, "
        f"forward + backward {both_ms:.2f} ms (x 30 layers x 2 micro-batches: {both_ms * 0.06:.2f} s per update)"
    )
    for name in ("fsdp2", "megatron-tp2"):
        if per_rank[0][name]["profile"]:
            print(f"\n{name} update, rank 0:\n{per_rank[0][name]['profile']}")


if __name__ == "__main__":
    main()
