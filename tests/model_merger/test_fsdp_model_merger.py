"""``python -m verl.model_merger merge --backend fsdp`` on checkpoints written by 2 gloo ranks after a PPO step:
the output loads with ``from_pretrained`` and reproduces the trained model's logits, for a full model and for
LoRA (where the step must change only adapter weights and the merged weights, both from the weight-sync
iterator and from the merger, reproduce the adapted model's logits)."""

from __future__ import annotations

import os

import pytest
import torch
from torch.distributed.tensor import DTensor

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import build_actor, rank_share, run_on_ranks, update_batch

PROBE = torch.tensor([[1, 17, 523, 99, 4000, 8, 250, 31]])


def _raw_state(module) -> dict[str, torch.Tensor]:
    return {
        k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().clone() for k, v in module.state_dict().items()
    }


def _train_and_save_both(rank, world, model_path, ckpt_root):
    """Full fine-tuning and LoRA in the same processes (one spawn for both cases)."""
    return {
        lora_rank: _train_and_save(rank, world, model_path, os.path.join(ckpt_root, f"lora{lora_rank}"), lora_rank)
        for lora_rank in (0, 4)
    }


def _train_and_save(rank, world, model_path, ckpt_dir, lora_rank):
    from transformers import AutoTokenizer

    from verl.utils.checkpoint import FSDPCheckpointManager
    from verl.workers.config import CheckpointConfig

    engine, actor = build_actor(model_path, world, 8, lora_rank=lora_rank, warmup_steps=0)
    before = _raw_state(engine.module)
    actor.update_policy(rank_share(update_batch(seed=7), rank, world))
    after = _raw_state(engine.module)
    engine.module.eval()
    with torch.no_grad():
        logits = engine.module(input_ids=PROBE).logits
        base_logits = None
        if lora_rank:  # the LoRA reference policy: the same module with its adapters switched off
            with engine.module.disable_adapter():
                base_logits = engine.module(input_ids=PROBE).logits
    merged = dict(engine.iter_full_state_dict())
    contents = ["model", "optimizer", "extra"] + ([] if lora_rank else ["hf_model"])
    manager = FSDPCheckpointManager(
        engine.module,
        engine.optimizer,
        engine.lr_scheduler,
        AutoTokenizer.from_pretrained(model_path),
        CheckpointConfig(save_contents=contents),
    )
    manager.save_checkpoint(ckpt_dir, global_step=1)
    if rank:
        return None
    return {"before": before, "after": after, "logits": logits, "merged": merged, "base_logits": base_logits}


def _merge(local_dir: str, target_dir: str) -> None:
    """The command line ``python -m verl.model_merger merge ...`` (its ``main``, in this process)."""
    from verl.model_merger.__main__ import main

    assert main(["merge", "--backend", "fsdp", "--local_dir", local_dir, "--target_dir", target_dir]) == 0


def _logits_of(model_dir_or_model) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    model = model_dir_or_model
    if isinstance(model, str):
        model = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    with torch.no_grad():
        return model(input_ids=PROBE).logits


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    path = tiny_model_path("llama")
    root = tmp_path_factory.mktemp("ckpt")
    return path, root, run_on_ranks(_train_and_save_both, 2, path, str(root))[0]


@pytest.mark.parametrize("lora_rank", [0, 4], ids=["full", "lora"])
def test_merged_checkpoint_reproduces_trained_logits(trained, tmp_path, lora_rank):
    from transformers import AutoModelForCausalLM

    path, root, results = trained
    ckpt = str(root / f"lora{lora_rank}")
    result = results[lora_rank]
    before, after = result["before"], result["after"]

    if lora_rank:
        adapters = [k for k in after if "lora_" in k]
        assert adapters and any(not torch.equal(before[k], after[k]) for k in adapters)
        for key in after:
            if "lora_" not in key:
                assert torch.equal(before[key], after[key]), f"base weight {key} changed under LoRA"
    else:
        assert any(not torch.equal(before[k], after[k]) for k in after)

    base = _logits_of(path)
    assert (result["logits"] - base).abs().max() > 1e-4  # the step changed the model's outputs
    if lora_rank:
        torch.testing.assert_close(result["base_logits"], base, atol=1e-5, rtol=1e-5)
    # weight-sync iterator: merged full weights in HF naming reproduce the trained/adapted logits
    synced = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    missing, unexpected = synced.load_state_dict(result["merged"], strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}
    torch.testing.assert_close(_logits_of(synced), result["logits"], atol=1e-4, rtol=1e-4)

    target = str(tmp_path / "hf")
    _merge(ckpt, target)
    assert any(name.endswith(".safetensors") for name in os.listdir(target))
    assert os.path.exists(os.path.join(target, "tokenizer.json"))
    torch.testing.assert_close(_logits_of(target), result["logits"], atol=1e-4, rtol=1e-4)
    if not lora_rank:  # checkpoint.save_contents with hf_model: the huggingface/ folder is a loadable model too
        torch.testing.assert_close(_logits_of(f"{ckpt}/huggingface"), result["logits"], atol=1e-4, rtol=1e-4)
