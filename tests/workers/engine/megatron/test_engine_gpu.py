"""The Megatron engine on GPUs (NCCL, bf16 autocast over float32 master weights) against the FSDP2 engine.

On the same SmolLM2-135M batch: log-probs, one PPO update's pg_loss and grad_norm of Megatron TP=2 (the
head-padded copy of SmolLM2, the same function; ``verl.models.mcore.pad_heads``), TP=2 with sequence parallelism,
and PP=2 (the original SmolLM2) are compared with FSDP2 on the same GPUs and with the float32 single-process
reference; TP=2 x PP=2 on 4 GPUs when there are 4. Then two steps at TP=2 (the warm-up schedule's first runs at
lr 0), save, load on the same layout and at PP=2, continue, and merge. Every comparison prints its mean / max
|diff| (the numbers the issue asks for). Run on ``nvidia-h100-x2`` (and ``-x4``):

    .venv/bin/python -m pytest tests/workers/engine/megatron/test_engine_gpu.py -s -q
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass

import pytest
import torch

from tests.support.models import smollm2_path, tp_padded_model_path
from tests.workers.actor.test_dp_actor import LR, make_update_batch, reference_step
from tests.workers.engine.fsdp.distributed import reference_log_probs, run_on_ranks, update_batch
from tests.workers.engine.megatron.helpers import run_actor_variant
from verl.models.mcore.pad_heads import drop_padding

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


@dataclass
class Parity:
    """One Megatron layout's outputs next to FSDP2's (same GPUs, bf16) and the float32 single-process reference."""

    log_probs: torch.Tensor
    """``(response tokens,)`` Megatron bf16 log-probs at the response mask, rows in data-parallel order."""
    fsdp_log_probs: torch.Tensor
    """``(response tokens,)`` FSDP2 bf16 log-probs at the same positions."""
    reference_log_probs: torch.Tensor
    """``(response tokens,)`` float32 single-process log-probs at the same positions (the independent reference)."""
    pg_loss: float
    fsdp_pg_loss: float
    reference_pg_loss: float
    grad_norm: float
    fsdp_grad_norm: float
    reference_grad_norm: float
    params: dict[str, torch.Tensor]
    """Megatron weights after the update, under the Hugging Face names, cut back to the original model's shapes
    (a head-padded layout's padding dropped)."""
    padding_max: float
    """Largest |weight| in the dropped head padding after the update (0: the padded heads stayed inert)."""
    reference_params: dict[str, torch.Tensor]
    """float32 reference weights after the same update."""
    fsdp_params: dict[str, torch.Tensor]
    """FSDP2's weights after the same update on the same GPUs (bf16 compute over float32 weights)."""

    def fraction_within(self, atol: float, params: dict[str, torch.Tensor] | None = None) -> float:
        """The smallest, over tensors, fraction of weights (Megatron's, or ``params``) within ``atol`` of the
        reference step."""
        params = self.params if params is None else params
        shared = [k for k in self.reference_params if k in params]
        return min(((params[k] - self.reference_params[k]).abs() <= atol).float().mean().item() for k in shared)

    def error(self, log_probs: torch.Tensor) -> torch.Tensor:
        """``|log_probs - float32 reference|`` per response token."""
        return (log_probs - self.reference_log_probs).abs()


def _measure_parity(world: int, layouts: dict) -> dict[str, Parity]:
    """Run FSDP2 and every Megatron layout on ``world`` GPUs over one SmolLM2 batch; print each comparison."""
    original = smollm2_path()
    padded = tp_padded_model_path(original, 2)
    batch = make_update_batch(original)
    ref_pg_loss, ref_grad_norm, _, _, ref_params = reference_step(original, batch)
    from transformers import AutoModelForCausalLM

    with torch.no_grad():
        fp32_model = AutoModelForCausalLM.from_pretrained(original, dtype=torch.float32)
        fp32_log_probs = reference_log_probs(fp32_model, batch)[batch["response_mask"].bool()]
    del fp32_model
    shapes = {k: v.shape for k, v in ref_params.items()}
    resolved = {name: (padded if needs_pad else original, layout) for name, (needs_pad, layout) in layouts.items()}
    per_rank = run_on_ranks(_parity_rank, world, original, padded, batch, resolved)
    mask = batch["response_mask"].bool()
    fsdp_log_probs = torch.cat([r["fsdp"]["log_probs"] for r in per_rank])[mask]
    fsdp_metrics = per_rank[0]["fsdp"]["metrics"]
    parities = {}
    for name in layouts:
        results = [r[name] for r in per_rank]
        metrics = results[0]["metrics"]
        params, padding = drop_padding(results[0]["params"], shapes)
        parity = Parity(
            log_probs=_collected_log_probs(results)[mask],
            fsdp_log_probs=fsdp_log_probs,
            reference_log_probs=fp32_log_probs,
            pg_loss=metrics["actor/pg_loss"][0],
            fsdp_pg_loss=fsdp_metrics["actor/pg_loss"][0],
            reference_pg_loss=ref_pg_loss,
            grad_norm=metrics["actor/grad_norm"][0],
            fsdp_grad_norm=fsdp_metrics["actor/grad_norm"][0],
            reference_grad_norm=ref_grad_norm,
            params=params,
            padding_max=max((float(t.abs().max()) for t in padding.values() if t.numel()), default=0.0),
            reference_params=ref_params,
            fsdp_params=per_rank[0]["fsdp"]["params"],
        )
        diff = (parity.log_probs - parity.fsdp_log_probs).abs()
        mine, theirs = parity.error(parity.log_probs), parity.error(parity.fsdp_log_probs)
        print(f"[{name}] bf16 log-prob |megatron - fsdp2| mean={diff.mean():.5f} max={diff.max():.5f}")
        print(
            f"[{name}] bf16 log-prob |x - fp32-ref| megatron mean={mine.mean():.5f} max={mine.max():.5f}; "
            f"fsdp2 mean={theirs.mean():.5f} max={theirs.max():.5f}"
        )
        print(
            f"[{name}] pg_loss megatron {parity.pg_loss:.5f} fsdp2 {parity.fsdp_pg_loss:.5f} "
            f"fp32-ref {ref_pg_loss:.5f}; grad_norm megatron {parity.grad_norm:.4f} "
            f"fsdp2 {parity.fsdp_grad_norm:.4f} fp32-ref {ref_grad_norm:.4f}"
        )
        print(
            f"[{name}] weights within 0.1*lr of the fp32 step (worst tensor): megatron "
            f"{parity.fraction_within(0.1 * LR):.4f} fsdp2 {parity.fraction_within(0.1 * LR, parity.fsdp_params):.4f}"
        )
        print(f"[{name}] largest |weight| in the head padding after the update: {parity.padding_max}")
        parities[name] = parity
    return parities


# Tolerances of bf16 autocast against the float32 single-process reference: bf16 rounds each op to 8 mantissa bits
# (relative 2**-9), and a log-prob goes through a 49k-way log-softmax over logits of size ~10-20 on this batch's
# random response tokens, so single tokens differ far more than the averages. Session 7's H200 run measured
# |megatron - fsdp2| at 0.063 mean / 0.34 max, above fixed bounds of 0.02 / 0.2 that neither engine was shown to
# meet. So the log-prob bound is relative: Megatron's error against float32 may be at most 1.5x FSDP2's error on the
# same GPUs (or the fixed bound, whichever is larger). The gradient norm gets 5% of the float32 reference. The PPO
# loss is held like the log-probs: its error against float32 may be 5% of the reference or 1.5x FSDP2's error,
# whichever is larger. Its clipped ratio exp(log p - old log p) turns log-prob errors into per-token jumps where a
# ratio crosses 1 +- eps. Session 10's H200 x2 run (same batch and weights) gave fp32 0.2195, FSDP2 0.2445 (11% off),
# Megatron TP=2 0.2282, TP=2+SP 0.2306 and PP=2 0.2035.
LOG_PROB_MEAN_DIFF = 0.02
LOG_PROB_MAX_DIFF = 0.2
ERROR_RATIO_TO_FSDP2 = 1.5
LOSS_RTOL, LOSS_ATOL = 0.05, 2e-3
GRAD_NORM_RTOL = 0.05
STEP_ATOL = 0.1 * LR
"""A weight "took the reference step" when it lands within a tenth of the learning rate of the fp32 weight."""
MIN_FRACTION_ON_STEP = 0.95
FRACTION_MARGIN_TO_FSDP2 = 0.05
"""AdamW's first step moves each weight by about lr * sign(grad), so a weight whose tiny gradient has the other sign
under bf16 lands 2 lr away. Session 8's H200 run: 75% of the worst tensor's weights within 0.1 lr for TP=2, 86% for
PP=2. The bound is FSDP2's fraction on the same GPUs less this margin (or 0.95, whichever is lower)."""


def _assert_parity(name: str, p: Parity) -> None:
    mine, theirs = p.error(p.log_probs), p.error(p.fsdp_log_probs)
    assert mine.mean() <= max(LOG_PROB_MEAN_DIFF, ERROR_RATIO_TO_FSDP2 * theirs.mean()), name
    assert mine.max() <= max(LOG_PROB_MAX_DIFF, ERROR_RATIO_TO_FSDP2 * theirs.max()), name
    loss_error, fsdp_loss_error = (abs(x - p.reference_pg_loss) for x in (p.pg_loss, p.fsdp_pg_loss))
    loss_bound = max(LOSS_RTOL * abs(p.reference_pg_loss) + LOSS_ATOL, ERROR_RATIO_TO_FSDP2 * fsdp_loss_error)
    assert loss_error <= loss_bound, f"{name}: pg_loss {p.pg_loss:.5f} vs fp32 {p.reference_pg_loss:.5f}"
    assert p.grad_norm == pytest.approx(p.reference_grad_norm, rel=GRAD_NORM_RTOL), name
    floor = min(MIN_FRACTION_ON_STEP, p.fraction_within(STEP_ATOL, p.fsdp_params) - FRACTION_MARGIN_TO_FSDP2)
    assert p.fraction_within(STEP_ATOL) >= floor, name
    assert p.padding_max == 0.0, f"{name}: the padded heads moved"


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_tp2_sp_and_pp2_match_fsdp2_on_smollm2():
    parities = _measure_parity(
        2,
        {
            "tp2": (True, dict(tp=2, micro=2)),
            "tp2-sp": (True, dict(tp=2, micro=2, sequence_parallel=True)),
            "pp2": (False, dict(pp=2, micro=1)),
            "tp2-offload": (True, dict(tp=2, micro=2, param_offload=True, optimizer_offload=True)),
        },
    )
    for name, p in parities.items():
        _assert_parity(name, p)


@pytest.mark.skipif(torch.cuda.device_count() < 4, reason="needs 4 GPUs")
def test_tp2_pp2_matches_fsdp2_on_smollm2():
    parities = _measure_parity(
        4,
        {
            "tp2xpp2": (True, dict(tp=2, pp=2, micro=1)),
            "tp2xpp2-sp": (True, dict(tp=2, pp=2, micro=1, sequence_parallel=True)),
        },
    )
    for name, p in parities.items():
        _assert_parity(name, p)


def _resume_rank(rank, world, path, folder):
    from tests.utils.checkpoint.test_megatron_checkpoint_manager import WARMUP, _manager, _step
    from tests.workers.engine.megatron.helpers import capture_clipped_grads, full_hf_tensors, megatron_actor

    batches = [update_batch(seed=seed) for seed in (1, 2, 3)]
    for batch in batches:
        batch["ref_log_prob"] = batch["old_log_probs"] + 0.1 * batch["response_mask"]
    engine, actor = megatron_actor(path, tp=2, optim_overrides=WARMUP)
    # WARMUP's first step runs at lr 0 (factor step / lr_warmup_steps): only the second one moves the weights
    _step(engine, actor, batches[0])
    _step(engine, actor, batches[1])
    _manager(engine).save_checkpoint(folder, global_step=2)
    saved = {k: v.detach().cpu().clone() for k, v in engine.iter_full_state_dict()}
    grads = {}

    def step_with_grads(label):  # step 3, and its clipped gradients as full Hugging Face tensors (on CPU)
        captured = capture_clipped_grads(engine)
        metrics = _step(engine, actor, batches[2])
        grads[label] = _cpu(full_hf_tensors(engine, captured))
        return metrics

    straight = step_with_grads("straight tp2")
    resumed = {}
    for name, layout in (("tp2", dict(tp=2)), ("pp2", dict(pp=2, micro=1))):
        del engine, actor
        _free()
        engine, actor = megatron_actor(path, optim_overrides=WARMUP, **layout)
        _manager(engine).load_checkpoint(folder)
        resumed[name] = step_with_grads(f"resumed {name}") if name == "pp2" else _step(engine, actor, batches[2])
    # the same PP=2 step from the saved weights by another route: a fresh engine built from the checkpoint's
    # Hugging Face export (the loss and grad norm come before the optimizer step, so its fresh Adam state is moot)
    del engine, actor
    _free()
    engine, actor = megatron_actor(os.path.join(folder, "huggingface"), pp=2, micro=1, optim_overrides=WARMUP)
    fresh_pp2 = _step(engine, actor, batches[2])
    return {
        "straight": straight,
        "resumed": resumed,
        "fresh_pp2": fresh_pp2,
        "saved": saved if rank == 0 else None,
        "grads": grads if rank == 0 else None,
    }


# Resuming on the layout that saved repeats the same computation (bf16 kernels may still sum in another order
# between runs), and so does a fresh PP=2 engine built from the checkpoint's Hugging Face export next to the PP=2
# engine that resumed from the checkpoint. Across layouts bf16 sums differently, so each layout's step is held to
# the float32 single-process step from the saved weights with the parity test's tolerances (in float32 on CPU,
# tests/utils/checkpoint/test_megatron_checkpoint_manager.py holds TP=2 -> PP=2 to 1e-5).
SAME_LAYOUT_RTOL = 5e-3


def _print_grad_agreement(grads: dict[str, dict[str, torch.Tensor]], reference: dict[str, torch.Tensor]) -> None:
    """Per layout, the tensors whose step-3 gradient agrees least with the fp32 step's: cosine and norm ratio (both
    independent of the clipping factor). A layout whose grad norm is off shows here which weights carry it."""
    for label, layout_grads in grads.items():
        rows = []
        for key, ref in reference.items():
            if key not in layout_grads or layout_grads[key].shape != ref.shape:
                continue
            mine, ref = layout_grads[key].float().flatten(), ref.float().flatten()
            cosine = float(torch.nn.functional.cosine_similarity(mine, ref, dim=0))
            rows.append((cosine, float(mine.norm() / ref.norm().clamp_min(1e-30)), key))
        rows.sort()
        worst = ", ".join(f"{key} cos {cos:.3f} norm x{ratio:.2f}" for cos, ratio, key in rows[:5])
        print(f"step 3 grads, {label}: {len(rows)} tensors; least like fp32: {worst}")


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_save_tp2_resume_pp2_and_merge(tmp_path):
    from transformers import AutoModelForCausalLM

    from tests.workers.engine.fsdp.distributed import update_batch
    from verl.model_merger.__main__ import main as merger_main

    padded = tp_padded_model_path(smollm2_path(), 2)
    folder = str(tmp_path / "global_step_2" / "actor")
    result = run_on_ranks(_resume_rank, 2, padded, folder)[0]
    batch = update_batch(seed=3)  # _resume_rank's third batch
    batch["ref_log_prob"] = batch["old_log_probs"] + 0.1 * batch["response_mask"]
    ref_pg_loss, ref_grad_norm, ref_grads, _, _ = reference_step(os.path.join(folder, "huggingface"), batch)
    _print_grad_agreement(result["grads"], ref_grads)
    straight = result["straight"]
    runs = {"straight tp2": straight, **{f"resumed {k}": v for k, v in result["resumed"].items()}}
    runs["fresh pp2 from the export"] = result["fresh_pp2"]
    for name, metrics in runs.items():
        print(
            f"step 3, {name}: pg_loss {metrics['actor/pg_loss'][0]:.5f} grad_norm {metrics['actor/grad_norm'][0]:.4f}"
        )
    print(f"step 3, fp32 reference from the saved weights: pg_loss {ref_pg_loss:.5f} grad_norm {ref_grad_norm:.4f}")
    same, other, fresh = result["resumed"]["tp2"], result["resumed"]["pp2"], result["fresh_pp2"]
    for key in ("actor/pg_loss", "actor/grad_norm"):
        assert same[key][0] == pytest.approx(straight[key][0], rel=SAME_LAYOUT_RTOL, abs=1e-5), key
        assert other[key][0] == pytest.approx(fresh[key][0], rel=SAME_LAYOUT_RTOL, abs=1e-5), key
    for name, metrics in runs.items():
        assert metrics["actor/pg_loss"][0] == pytest.approx(ref_pg_loss, rel=LOSS_RTOL, abs=LOSS_ATOL), name
        assert metrics["actor/grad_norm"][0] == pytest.approx(ref_grad_norm, rel=GRAD_NORM_RTOL), name
    target = str(tmp_path / "hf")
    assert merger_main(["merge", "--backend", "megatron", "--local_dir", folder, "--target_dir", target]) == 0
    merged = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).state_dict()
    base = AutoModelForCausalLM.from_pretrained(padded, dtype=torch.float32).state_dict()
    assert set(merged) == set(base)
    saved = result["saved"]
    assert set(saved) <= set(merged)
    assert all(torch.equal(merged[k], saved[k]) for k in saved), "the merged weights are the saved ones"
    assert any(not torch.equal(base[k], merged[k]) for k in base)  # the exported weights are the trained ones
