"""FSDPCheckpointManager on 2 gloo ranks: save → load into a fresh engine → continue is bit-identical to an
uninterrupted run; the folder appears only complete (atomic), carries the HF config and tokenizer, and
``max_ckpt_to_keep`` rotates old folders."""

from __future__ import annotations

import os

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import build_actor, rank_share, run_on_ranks, update_batch

BATCH = 8


def _straight_and_resumed(rank, world, model_path, batches, ckpt_root):
    """Both runs in the same processes (one spawn): uninterrupted, then save-after-step-1 and resume."""
    straight = _train(rank, world, model_path, batches, os.path.join(ckpt_root, "a"), 0)
    torch.manual_seed(0)
    resumed = _train(rank, world, model_path, batches, os.path.join(ckpt_root, "b"), 1)
    return straight, resumed


def _train(rank, world, model_path, batches, ckpt_root, resume_after):
    """Train on ``batches``; with ``resume_after=k`` save after k steps, rebuild everything and load."""
    from transformers import AutoTokenizer

    from verl.utils.checkpoint import FSDPCheckpointManager

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    engine, actor = build_actor(model_path, world, BATCH, shuffle=True)
    manager = FSDPCheckpointManager(engine.module, engine.optimizer, engine.lr_scheduler, tokenizer)
    losses, lrs = [], []
    for step, batch in enumerate(batches, start=1):
        metrics = actor.update_policy(rank_share(batch, rank, world))
        losses.append(metrics["actor/pg_loss"][0])
        lrs.append(engine.lr_scheduler_step())
        torch.randn(3)  # consume the RNG: restoring it must put the stream back where it was
        if resume_after:
            path = os.path.join(ckpt_root, f"global_step_{step}", "actor")
            manager.save_checkpoint(path, global_step=step, max_ckpt_to_keep=1)
        if step == resume_after:
            engine, actor = build_actor(model_path, world, BATCH, shuffle=True)
            torch.manual_seed(1234)  # a different stream, which the load must undo
            manager = FSDPCheckpointManager(engine.module, engine.optimizer, engine.lr_scheduler, tokenizer)
            manager.load_checkpoint(path)
    params = dict(engine.iter_full_state_dict())
    return {"losses": losses, "lrs": lrs, "params": params, "rng": torch.randn(4)}


def test_save_load_continue_is_bit_identical(tmp_path):
    path = tiny_model_path("llama")
    batches = [update_batch(seed) for seed in range(2)]
    straight, resumed = zip(*run_on_ranks(_straight_and_resumed, 2, path, batches, str(tmp_path)))
    for rank in range(2):
        assert straight[rank]["losses"] == resumed[rank]["losses"]
        assert straight[rank]["lrs"] == resumed[rank]["lrs"]
        assert torch.equal(straight[rank]["rng"], resumed[rank]["rng"])
    assert straight[0]["lrs"][:2] == [0.0, 0.5e-3]  # linear warmup over 2 steps
    for name, tensor in straight[0]["params"].items():
        assert torch.equal(tensor, resumed[0]["params"][name]), name

    root = tmp_path / "b"
    assert sorted(os.listdir(root)) == ["global_step_1", "global_step_2"]
    # rotation removed the oldest actor folder; no partial folder is left anywhere
    assert not (root / "global_step_1" / "actor").exists()
    assert not any(name.endswith(".partial") for name in os.listdir(root / "global_step_2"))
    hf = root / "global_step_2" / "actor" / "huggingface"
    assert (hf / "config.json").exists() and (hf / "tokenizer.json").exists()


def test_interrupted_save_keeps_previous_checkpoint(tmp_path):
    from verl.utils.checkpoint.atomic_dir import atomic_checkpoint_dir

    target = tmp_path / "actor"
    with atomic_checkpoint_dir(str(target)) as tmp:
        (open(os.path.join(tmp, "weights"), "w")).write("complete")
    with pytest.raises(RuntimeError):
        with atomic_checkpoint_dir(str(target)) as tmp:
            (open(os.path.join(tmp, "weights"), "w")).write("half")
            raise RuntimeError("killed mid-save")
    assert (target / "weights").read_text() == "complete"
