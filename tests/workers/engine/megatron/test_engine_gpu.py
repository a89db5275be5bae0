"""The Megatron engine on GPUs (NCCL, bf16 autocast over float32 master weights) against the FSDP2 engine.

On the same SmolLM2-135M batch: log-probs, one PPO update's pg_loss and grad_norm of Megatron TP=2 (the
head-padded copy of SmolLM2, the same function; ``verl.models.mcore.pad_heads``), TP=2 with sequence parallelism,
and PP=2 (the original SmolLM2) are compared with FSDP2 on the same GPUs and with the float32 single-process
reference; TP=2 x PP=2 on 4 GPUs when there are 4. Then save at TP=2, load at PP=2, continue, and merge. Every
comparison prints its mean / max |diff| (the numbers the issue asks for). Run on ``nvidia-h100-x2`` (and ``-x4``):

    .venv/bin/python -m pytest tests/workers/engine/megatron/test_engine_gpu.py -s -q
"""

from __future__ import annotations

import gc

import pytest
import torch

from tests.support.models import smollm2_path, tp_padded_model_path
from tests.workers.actor.test_dp_actor import LR, make_update_batch, reference_step
from tests.workers.engine.fsdp.distributed import run_on_ranks, update_batch
from tests.workers.engine.megatron.helpers import run_actor_variant

pytestmark = pytest.mark.gpu


def _cpu(tree):
    if isinstance(tree, torch.Tensor):
        return tree.detach().cpu()
    if isinstance(tree, dict):
        return {k: _cpu(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_cpu(v) for v in tree]
    return tree


def _free() -> None:
    gc.collect()
    torch.cuda.empty_cache()


def _parity_rank(rank, world, original, padded, batch, layouts):
    from tests.workers.actor.test_dp_actor import _one_variant

    out = {"fsdp": _cpu(_one_variant(rank, world, original, batch, 2, False, True))}
    _free()
    for name, (path, layout) in layouts.items():
        out[name] = _cpu(run_actor_variant(rank, world, path, batch, layout))
        _free()
    return out


def _collected_log_probs(results) -> torch.Tensor:
    collected = sorted((r for r in results if r["collect"]), key=lambda r: r["dp_rank"])
    return torch.cat([r["log_probs"] for r in collected])


def _compare(name, results, fsdp_log_probs, fsdp_metrics, reference, mask):
    ref_pg_loss, ref_grad_norm, _, _, ref_params = reference
    log_probs = _collected_log_probs(results)
    diff = (log_probs[mask] - fsdp_log_probs[mask]).abs()
    print(f"[{name}] bf16 log-prob |megatron - fsdp2| mean={diff.mean():.5f} max={diff.max():.5f}")
    metrics = results[0]["metrics"]
    pg_loss, grad_norm = metrics["actor/pg_loss"][0], metrics["actor/grad_norm"][0]
    fsdp_pg, fsdp_norm = fsdp_metrics["actor/pg_loss"][0], fsdp_metrics["actor/grad_norm"][0]
    print(
        f"[{name}] pg_loss megatron {pg_loss:.5f} fsdp2 {fsdp_pg:.5f} fp32-ref {ref_pg_loss:.5f}; "
        f"grad_norm megatron {grad_norm:.4f} fsdp2 {fsdp_norm:.4f} fp32-ref {ref_grad_norm:.4f}"
    )
    assert diff.mean() < 0.02 and diff.max() < 0.2, name
    assert pg_loss == pytest.approx(fsdp_pg, rel=0.05, abs=2e-3), name
    assert grad_norm == pytest.approx(fsdp_norm, rel=0.05), name
    assert pg_loss == pytest.approx(ref_pg_loss, rel=0.05, abs=2e-3), name
    assert grad_norm == pytest.approx(ref_grad_norm, rel=0.05), name
    params = results[0]["params"]
    close = [((params[k] - v).abs() <= 0.1 * LR).float().mean().item() for k, v in ref_params.items() if k in params]
    print(f"[{name}] fraction of weights within 0.1*lr of the fp32 reference step (worst tensor): {min(close):.4f}")
    assert min(close) > 0.95, name


def _run_parity(world: int, layouts: dict):
    original = smollm2_path()
    padded = tp_padded_model_path(original, 2)
    batch = make_update_batch(original)
    reference = reference_step(original, batch)
    resolved = {name: (padded if needs_pad else original, layout) for name, (needs_pad, layout) in layouts.items()}
    per_rank = run_on_ranks(_parity_rank, world, original, padded, batch, resolved)
    fsdp_log_probs = torch.cat([r["fsdp"]["log_probs"] for r in per_rank])
    mask = batch["response_mask"].bool()
    for name in layouts:
        _compare(name, [r[name] for r in per_rank], fsdp_log_probs, per_rank[0]["fsdp"]["metrics"], reference, mask)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_tp2_sp_and_pp2_match_fsdp2_on_smollm2():
    _run_parity(
        2,
        {
            "tp2": (True, dict(tp=2, micro=2)),
            "tp2-sp": (True, dict(tp=2, micro=2, sequence_parallel=True)),
            "pp2": (False, dict(pp=2, micro=1)),
            "tp2-offload": (True, dict(tp=2, micro=2, param_offload=True, optimizer_offload=True)),
        },
    )


@pytest.mark.skipif(torch.cuda.device_count() < 4, reason="needs 4 GPUs")
def test_tp2_pp2_matches_fsdp2_on_smollm2():
    _run_parity(
        4,
        {
            "tp2xpp2": (True, dict(tp=2, pp=2, micro=1)),
            "tp2xpp2-sp": (True, dict(tp=2, pp=2, micro=1, sequence_parallel=True)),
        },
    )


def _resume_rank(rank, world, path, folder):
    from tests.utils.checkpoint.test_megatron_checkpoint_manager import WARMUP, _manager, _step
    from tests.workers.engine.megatron.helpers import megatron_actor

    batches = [update_batch(seed=1), update_batch(seed=2)]
    for batch in batches:
        batch["ref_log_prob"] = batch["old_log_probs"] + 0.1 * batch["response_mask"]
    engine, actor = megatron_actor(path, tp=2, optim_overrides=WARMUP)
    _step(engine, actor, batches[0])
    _manager(engine).save_checkpoint(folder, global_step=1)
    straight = _step(engine, actor, batches[1])
    _free()
    engine, actor = megatron_actor(path, pp=2, micro=1, optim_overrides=WARMUP)
    _manager(engine).load_checkpoint(folder)
    resumed = _step(engine, actor, batches[1])
    return {"straight": straight, "resumed": resumed}


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_save_tp2_resume_pp2_and_merge(tmp_path):
    from transformers import AutoModelForCausalLM

    from verl.model_merger.__main__ import main as merger_main

    padded = tp_padded_model_path(smollm2_path(), 2)
    folder = str(tmp_path / "global_step_1" / "actor")
    result = run_on_ranks(_resume_rank, 2, padded, folder)[0]
    straight, resumed = result["straight"], result["resumed"]
    print(f"resume TP=2 -> PP=2: pg_loss {straight['actor/pg_loss']} vs {resumed['actor/pg_loss']}")
    print(f"grad_norm {straight['actor/grad_norm']} vs {resumed['actor/grad_norm']}")
    assert resumed["actor/pg_loss"][0] == pytest.approx(straight["actor/pg_loss"][0], rel=1e-2, abs=1e-4)
    assert resumed["actor/grad_norm"][0] == pytest.approx(straight["actor/grad_norm"][0], rel=1e-2)
    target = str(tmp_path / "hf")
    assert merger_main(["merge", "--backend", "megatron", "--local_dir", folder, "--target_dir", target]) == 0
    merged = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).state_dict()
    base = AutoModelForCausalLM.from_pretrained(padded, dtype=torch.float32).state_dict()
    assert set(merged) == set(base)
    assert any(not torch.equal(base[k], merged[k]) for k in base)  # the exported weights are the trained ones
