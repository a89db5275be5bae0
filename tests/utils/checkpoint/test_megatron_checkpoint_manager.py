"""MegatronCheckpointManager on 2 gloo ranks, and the ``megatron`` model-merger backend.

A TP=2 actor takes two PPO steps (the warm-up schedule's first runs at lr 0, so only the second moves the weights)
and saves (model, Adam moments, LR schedule, RNG, HF export), then takes a third step. A PP=2 engine with
``megatron.use_dist_checkpointing`` starts from the saved weights. Loading the checkpoint into a fresh TP=2 engine
and into a TP=1 x DP=2 engine with the ZeRO-1 optimizer (a different layout) restores exactly the saved weights and
learning rate, and the third step then gives the same loss, grad norm and weights
as the original engine. ``python -m verl.model_merger merge --backend megatron`` turns the checkpoint into a
Hugging Face folder holding exactly the saved weights.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import run_on_ranks, update_batch
from tests.workers.engine.megatron.helpers import megatron_actor

pytest.importorskip("megatron.core")


def _step(engine, actor, batch):
    from verl.protocol import DataProto

    data = DataProto.from_dict(tensors=batch, meta_info={"temperature": 1.0}).chunk(engine.dp_size)[engine.dp_rank]
    metrics = actor.update_policy(data)
    metrics["actor/lr"] = engine.lr_scheduler_step()
    return metrics


def _manager(engine):
    from verl.utils.checkpoint.megatron_checkpoint_manager import MegatronCheckpointManager
    from verl.workers.config.roles import CheckpointConfig

    contents = CheckpointConfig(save_contents=["model", "optimizer", "extra", "hf_model"])
    return MegatronCheckpointManager(engine, None, contents)


WARMUP = {"lr_warmup_steps": 3, "total_training_steps": 10}  # the lr changes every step: the schedule must resume


def _checkpoint_rank(rank, world, path, batches, folder):
    out = {}
    engine, actor = megatron_actor(path, tp=2, optim_overrides=WARMUP)
    # WARMUP's first step runs at lr 0 (factor step / lr_warmup_steps): only the second one moves the weights
    _step(engine, actor, batches[1])
    _step(engine, actor, batches[0])
    _manager(engine).save_checkpoint(folder, global_step=2)
    out["saved"] = {k: v.clone() for k, v in engine.iter_full_state_dict()}
    out["original"] = _step(engine, actor, batches[1])
    out["original_params"] = dict(engine.iter_full_state_dict())
    # megatron.use_dist_checkpointing: a new engine starts from the checkpoint's weights instead of the HF files
    engine, _ = megatron_actor(path, pp=2, micro=1, use_dist_checkpointing=True, dist_checkpointing_path=folder)
    out["dist_checkpointing_loaded"] = dict(engine.iter_full_state_dict())
    layouts = {"same": dict(tp=2), "resharded": dict(tp=1, use_distributed_optimizer=True), "pp2": dict(pp=2, micro=1)}
    for name, layout in layouts.items():
        engine, actor = megatron_actor(path, optim_overrides=WARMUP, **layout)
        _manager(engine).load_checkpoint(folder)
        out[f"{name}_loaded"] = dict(engine.iter_full_state_dict())
        out[f"{name}_lr"] = engine.get_lr()
        out[name] = _step(engine, actor, batches[1])
        out[f"{name}_params"] = dict(engine.iter_full_state_dict())
    return out if rank == 0 else None


def test_save_resume_reshard_and_merge(tmp_path):
    path = tiny_model_path("llama")
    batches = [update_batch(seed=1), update_batch(seed=2)]
    for batch in batches:  # the helper's actor adds a KL loss against the reference
        batch["ref_log_prob"] = batch["old_log_probs"] + 0.1 * batch["response_mask"]
    folder = str(tmp_path / "global_step_2" / "actor")
    result = run_on_ranks(_checkpoint_rank, 2, path, batches, folder)[0]
    saved, original = result["saved"], result["original"]
    for key, tensor in saved.items():
        assert torch.equal(result["dist_checkpointing_loaded"][key], tensor), f"use_dist_checkpointing: {key}"
    for name in ("same", "resharded", "pp2"):
        for key, tensor in saved.items():
            assert torch.equal(result[f"{name}_loaded"][key], tensor), f"{name}: {key} not restored"
        assert result[f"{name}_lr"] == pytest.approx(original["actor/lr"]), name
        metrics = result[name]
        assert metrics["actor/pg_loss"][0] == pytest.approx(original["actor/pg_loss"][0], rel=1e-5, abs=1e-7), name
        assert metrics["actor/grad_norm"][0] == pytest.approx(original["actor/grad_norm"][0], rel=1e-5), name
        for key, tensor in result["original_params"].items():
            torch.testing.assert_close(result[f"{name}_params"][key], tensor, atol=1e-6, rtol=0, msg=f"{name} {key}")

    target = tmp_path / "merged"
    cmd = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "megatron", "--local_dir", folder]
    subprocess.run([*cmd, "--target_dir", str(target)], check=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    merged = load_file(str(target / "model.safetensors"))
    assert merged.keys() == saved.keys() - {"lm_head.weight"}  # tied: the file keeps the embedding only
    assert all(torch.equal(merged[k], saved[k]) for k in merged)
    exported = load_file(os.path.join(folder, "huggingface", "model.safetensors"))
    assert exported.keys() == merged.keys() and all(torch.equal(exported[k], saved[k]) for k in merged)
    model = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32)
    assert torch.equal(model.lm_head.weight, saved["model.embed_tokens.weight"])  # tied head restored
    initial = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).state_dict()
    assert any(not torch.equal(initial[k], merged[k]) for k in merged), "saved weights must differ from the initial"
