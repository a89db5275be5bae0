"""FSDP2 vs the Megatron engine on the GPUs of one machine: log-probs and one PPO update of SmolLM2-135M.

Same GSM8K-shaped batch for every engine (``SEQUENCES`` rows, prompts of 100-384 tokens left-padded to 384,
responses of 32-256 tokens right-padded to 256, micro-batches by a token budget), run in one process group:

* FSDP2 over all GPUs (the baseline; data parallel);
* Megatron TP=2 on the head-padded SmolLM2 (``verl.models.mcore.pad_heads``: 12 query / 4 key-value heads, the
  same function), with and without sequence parallelism;
* Megatron PP=2 on SmolLM2 itself; TP=2 x PP=2 when there are 4 GPUs.

Per engine: seconds of ``compute_log_prob`` (with entropy) and of ``update_policy`` (best of ``REPEATS`` after a
warm-up), the update's MFU (FLOPs of the original SmolLM2 over the batch, all GPUs), peak allocated memory, the
ratios to FSDP2, and mean / max |log-prob - FSDP2's| in bf16. Needs 2 GPUs (prints why and returns otherwise):

    python -m benchmarks.bench_megatron_vs_fsdp            # all GPUs of the machine (2 or 4)
"""

from __future__ import annotations

import gc
import time

import torch

SEQUENCES, PROMPT, RESPONSE = 64, 384, 256
TOKEN_BUDGET = 8192
REPEATS = 2


def rollout_update_batch(
    sequences: int, prompt: int, response: int, min_prompt: int, min_response: int, seed: int = 0, vocab: int = 49152
) -> dict[str, torch.Tensor]:
    """Rollout-layout batch (left-padded prompts of ``min_prompt..prompt`` tokens, right-padded responses of
    ``min_response..response``) with random old/ref log-probs and advantages (shared with ``bench_megatron_cpu``)."""
    gen = torch.Generator().manual_seed(seed)
    prompt_lens = torch.randint(min_prompt, prompt + 1, (sequences,), generator=gen)
    response_lens = torch.randint(min_response, response + 1, (sequences,), generator=gen)
    prompt_mask = (torch.arange(prompt) >= prompt - prompt_lens[:, None]).long()
    response_mask = (torch.arange(response) < response_lens[:, None]).long()
    attention_mask = torch.cat([prompt_mask, response_mask], dim=1)
    tokens = torch.randint(3, vocab, (sequences, prompt + response), generator=gen)
    input_ids = tokens * attention_mask + 2 * (1 - attention_mask)
    mask = response_mask.float()
    return {
        "prompts": input_ids[:, :prompt],
        "responses": input_ids[:, prompt:],
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": (attention_mask.cumsum(-1) - 1).clamp(min=0),
        "response_mask": response_mask,
        "old_log_probs": (-8.0 + torch.randn(mask.shape, generator=gen)) * mask,
        "ref_log_prob": (-8.0 + torch.randn(mask.shape, generator=gen)) * mask,
        "advantages": torch.randn(mask.shape, generator=gen) * mask,
    }


def gsm8k_shaped_batch(seed: int = 0, vocab: int = 49152) -> dict[str, torch.Tensor]:
    """The benchmark's batch: 64 sequences, prompts of 100-384 tokens, responses of 32-256."""
    return rollout_update_batch(SEQUENCES, PROMPT, RESPONSE, 100, 32, seed, vocab)


def update_actor_config(sequences: int, dp: int, budget: int):
    """The actor config both engines update with: one mini-batch of ``sequences`` over ``dp`` ranks, micro-batches
    from a ``budget``-token dynamic budget, KL loss, no entropy term (shared with ``bench_megatron_cpu``)."""
    from verl.workers.config import FSDPActorConfig, OptimConfig

    return FSDPActorConfig(
        ppo_mini_batch_size=sequences // dp,
        use_dynamic_bsz=True,
        ppo_max_token_len_per_gpu=budget,
        entropy_coeff=0.0,
        use_kl_loss=True,
        kl_loss_coef=0.001,
        optim=OptimConfig(lr=1e-6),
    )


def _actor_config(dp: int):
    return update_actor_config(SEQUENCES, dp, TOKEN_BUDGET)


def _build(name: str, layout: dict, original: str, padded: str):
    """``(dp_size, dp_rank, actor)`` of one engine variant."""
    from verl.workers.config import FSDPEngineConfig, HFModelConfig, McoreEngineConfig, OptimConfig

    if name == "fsdp2":
        from verl.workers.actor import DataParallelPPOActor
        from verl.workers.engine.fsdp.engine import FSDPEngine

        model_config = HFModelConfig(path=original, use_remove_padding=True, enable_gradient_checkpointing=False)
        engine = FSDPEngine(model_config, FSDPEngineConfig(), OptimConfig(lr=1e-6), role="actor").initialize()
        actor = DataParallelPPOActor(_actor_config(engine.dp_size), engine.module, engine.optimizer)
        return engine.dp_size, engine.dp_rank, actor
    from megatron.core import parallel_state

    from verl.workers.actor.megatron_actor import MegatronPPOActor
    from verl.workers.engine.megatron.engine import MegatronEngine

    if parallel_state.model_parallel_is_initialized():
        parallel_state.destroy_model_parallel()
    path = padded if layout.get("tensor_model_parallel_size", 1) > 1 else original
    engine_config = McoreEngineConfig(**layout)
    engine = MegatronEngine(
        HFModelConfig(path=path, enable_gradient_checkpointing=False), engine_config, OptimConfig(lr=1e-6), role="actor"
    ).initialize()
    return engine.dp_size, engine.dp_rank, MegatronPPOActor(_actor_config(engine.dp_size), engine)


def _timed(fn, repeats: int) -> tuple[float, object]:
    result, best = fn(), float("inf")  # warm-up
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        result = fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best, result


def _measure(actor, data) -> tuple[float, float, torch.Tensor]:
    """``(log_prob seconds, update seconds, log-probs)`` of one actor."""
    log_prob_s, (log_probs, _) = _timed(lambda: actor.compute_log_prob(data, calculate_entropy=True), REPEATS)
    update_s, _ = _timed(lambda: actor.update_policy(data), REPEATS)
    return log_prob_s, update_s, log_probs


def _rank(rank, world, variants, original, padded, batch):
    from verl.protocol import DataProto

    out = {}
    for name, layout in variants.items():
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        dp, dp_rank, actor = _build(name, layout, original, padded)
        data = DataProto.from_dict(tensors=batch, meta_info={"temperature": 1.0}).chunk(dp)[dp_rank]
        data.meta_info.update(micro_batch_size=None, use_dynamic_bsz=True, max_token_len=TOKEN_BUDGET)
        log_prob_s, update_s, log_probs = _measure(actor, data)
        engine = getattr(actor, "engine", None)
        out[name] = {
            "log_prob_s": log_prob_s,
            "update_s": update_s,
            "peak_gb": torch.cuda.max_memory_allocated() / 1e9,
            "log_probs": log_probs.cpu(),
            "dp_rank": dp_rank,
            "collect": engine.is_collect_rank if engine is not None else True,
        }
    return out


def variants(world: int) -> dict[str, dict]:
    found = {
        "fsdp2": {},
        "megatron-tp2": dict(tensor_model_parallel_size=2, sequence_parallel=False),
        "megatron-tp2-sp": dict(tensor_model_parallel_size=2, sequence_parallel=True),
        "megatron-pp2": dict(pipeline_model_parallel_size=2),
    }
    if world >= 4:
        found["megatron-tp2xpp2"] = dict(tensor_model_parallel_size=2, pipeline_model_parallel_size=2)
    return found


def main() -> None:
    if torch.cuda.device_count() < 2:
        print(f"skipped: needs 2 GPUs, found {torch.cuda.device_count()}")
        return
    from transformers import AutoConfig

    from tests.support.models import smollm2_path, tp_padded_model_path
    from tests.workers.engine.fsdp.distributed import run_on_ranks
    from verl.utils.flops_counter import FlopsCounter, compute_mfu

    world = 4 if torch.cuda.device_count() >= 4 else 2
    original = smollm2_path()
    padded = tp_padded_model_path(original, 2)
    batch = gsm8k_shaped_batch()
    chosen = variants(world)
    per_rank = run_on_ranks(_rank, world, chosen, original, padded, batch)
    counter = FlopsCounter(AutoConfig.from_pretrained(original))
    seqlens = batch["attention_mask"].sum(-1).tolist()
    mask = batch["response_mask"].bool()
    print(f"{torch.cuda.get_device_name()} x {world}; {SEQUENCES} sequences, {sum(seqlens)} tokens, bf16 compute")
    print("| engine | log_prob s | update s | update / fsdp2 | update MFU | peak GB | |lp - fsdp2| mean / max |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    baseline = None
    for name in chosen:
        results = [r[name] for r in per_rank]
        collected = sorted((r for r in results if r["collect"]), key=lambda r: r["dp_rank"])
        log_probs = torch.cat([r["log_probs"] for r in collected])
        update_s = max(r["update_s"] for r in results)
        log_prob_s = max(r["log_prob_s"] for r in results)
        achieved, peak = counter.estimate_flops(seqlens, update_s)
        mfu = compute_mfu(achieved, peak, world)
        if baseline is None:
            baseline = (update_s, log_probs)
        diff = (log_probs[mask] - baseline[1][mask]).abs()
        print(
            f"| {name} | {log_prob_s:.3f} | {update_s:.3f} | {update_s / baseline[0]:.2f} | {mfu:.3%} | "
            f"{max(r['peak_gb'] for r in results):.1f} | {diff.mean():.4f} / {diff.max():.4f} |"
        )


if __name__ == "__main__":
    main()
