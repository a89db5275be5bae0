"""The CPU checks again on GPUs with nccl and bf16 mixed precision (fp32 master weights, fp32 reduce).

Tolerances are those of bf16 compute: log-probs and the first PPO step against the fp32 single-process
reference, save → load → continue, and the merger's export. Runs on 2 GPUs when present, else 1.
"""

from __future__ import annotations

import os

import pytest
import torch

from tests.support.models import smollm2_path, tiny_model_path
from tests.workers.actor.test_dp_actor import LR, make_update_batch, reference_step
from tests.workers.engine.fsdp.distributed import (
    build_actor,
    rank_share,
    reference_log_probs,
    run_on_ranks,
    update_batch,
)

pytestmark = pytest.mark.gpu


def _world() -> int:
    return min(2, torch.cuda.device_count())


def _cpu(tree):
    if isinstance(tree, torch.Tensor):
        return tree.detach().cpu()
    if isinstance(tree, dict):
        return {k: _cpu(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_cpu(v) for v in tree]
    return tree


def _update_rank(rank, world, model_path, batch):
    from tests.workers.actor.test_dp_actor import _one_variant
    from verl.workers.engine.fsdp.model_builder import pick_attn_implementation

    out = _one_variant(rank, world, model_path, batch, 2, False, True)
    out["attn"] = pick_attn_implementation()
    offload = _one_variant(
        rank, world, model_path, batch, 2, False, True, {"param_offload": True, "optimizer_offload": True}
    )
    return _cpu({"plain": out, "offload": offload})


def test_bf16_log_probs_and_update_match_fp32_reference():
    path = tiny_model_path("llama")
    batch = make_update_batch(path)
    ref_pg_loss, ref_grad_norm, _, _, ref_params = reference_step(path, batch)
    per_rank = run_on_ranks(_update_rank, _world(), path, batch)
    from transformers import AutoModelForCausalLM

    with torch.no_grad():
        expected = reference_log_probs(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), batch)
    mask = batch["response_mask"].bool()
    for variant in ("plain", "offload"):
        results = [r[variant] for r in per_rank]
        log_probs = torch.cat([r["log_probs"] for r in results])
        diff = (log_probs[mask] - expected[mask]).abs()
        attn = per_rank[0]["plain"]["attn"]
        print(f"[{variant}] attn={attn} world={_world()} bf16 log-prob |diff| mean={diff.mean():.4f}")
        print(f"[{variant}] max |diff| {diff.max():.4f}")
        assert diff.mean() < 0.02 and diff.max() < 0.2
        metrics = results[0]["metrics"]
        pg_loss, grad_norm = metrics["actor/pg_loss"][0], metrics["actor/grad_norm"][0]
        print(
            f"[{variant}] pg_loss {pg_loss:.5f} vs {ref_pg_loss:.5f}; grad_norm {grad_norm:.4f} vs {ref_grad_norm:.4f}"
        )
        assert pg_loss == pytest.approx(ref_pg_loss, rel=0.05, abs=2e-3)
        assert grad_norm == pytest.approx(ref_grad_norm, rel=0.05)
        params = results[0]["params"]
        close = [((params[k] - v).abs() <= 0.1 * LR).float().mean().item() for k, v in ref_params.items()]
        print(
            f"[{variant}] fraction of weights within 0.1*lr of the fp32 reference step (worst tensor): {min(close):.4f}"
        )
        assert min(close) > 0.95


def _resume_rank(rank, world, model_path, ckpt_root):
    """Uninterrupted two steps vs step, save, rebuild, load, step (same processes)."""
    from verl.utils.checkpoint import FSDPCheckpointManager

    runs = []
    for resume in (False, True):
        torch.manual_seed(0)
        engine, actor = build_actor(model_path, world, 8, warmup_steps=0)
        losses = []
        for step, seed in enumerate((0, 1), start=1):
            losses.append(actor.update_policy(rank_share(update_batch(seed), rank, world))["actor/pg_loss"][0])
            engine.lr_scheduler_step()
            if resume and step == 1:
                path = os.path.join(ckpt_root, "global_step_1", "actor")
                FSDPCheckpointManager(engine.module, engine.optimizer, engine.lr_scheduler).save_checkpoint(path)
                engine, actor = build_actor(model_path, world, 8, warmup_steps=0)
                FSDPCheckpointManager(engine.module, engine.optimizer, engine.lr_scheduler).load_checkpoint(path)
        runs.append({"losses": losses, "params": _cpu(dict(engine.iter_full_state_dict()))})
    return runs


def test_bf16_save_load_continue_and_merge(tmp_path):
    from transformers import AutoModelForCausalLM

    from verl.model_merger.__main__ import main as merger_main

    path = smollm2_path()
    straight, resumed = run_on_ranks(_resume_rank, _world(), path, str(tmp_path))[0]
    identical = all(torch.equal(v, resumed["params"][k]) for k, v in straight["params"].items())
    worst = max((v - resumed["params"][k]).abs().max().item() for k, v in straight["params"].items())
    print(f"SmolLM2 resume: losses {straight['losses']} vs {resumed['losses']}")
    print(f"bit-identical={identical} max|diff|={worst:.2e}")
    assert straight["losses"][0] == resumed["losses"][0]
    assert resumed["losses"][1] == pytest.approx(straight["losses"][1], rel=1e-3, abs=1e-5)
    assert worst < 1e-5

    target = str(tmp_path / "hf")
    ckpt = str(tmp_path / "global_step_1" / "actor")
    assert merger_main(["merge", "--backend", "fsdp", "--local_dir", ckpt, "--target_dir", target]) == 0
    merged = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).state_dict()
    base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).state_dict()
    assert set(merged) == set(base)
    assert any(not torch.equal(base[k], merged[k]) for k in base)  # the exported weights are the trained ones
