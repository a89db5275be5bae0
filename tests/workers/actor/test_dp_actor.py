"""DataParallelPPOActor on FSDP2 over 2 gloo ranks against plain single-process references.

* log-probs (padded, remove-padding, dynamic batch size) equal per-sequence HF forwards without padding;
* one ``update_policy`` step equals a PPO step written out here by hand (clipped surrogate + entropy bonus
  + low-variance KL, token-mean over the whole mini-batch, grad clipping, AdamW) — same loss, grad norm and
  parameters — on 2 ranks and 1 rank, with several micro-batch splits and dynamic batch size.
"""

from __future__ import annotations

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import reference_log_probs, rollout_batch, run_on_ranks

LR, EPS, WD, CLIP, ENT, KL = 1e-3, 1e-6, 0.01, 0.2, 0.01, 0.1
BATCH = 8


def make_update_batch(model_path: str) -> dict[str, torch.Tensor]:
    """Rollout batch plus old/ref log-probs near the model's own and random advantages."""
    from transformers import AutoModelForCausalLM

    batch = rollout_batch(batch_size=BATCH)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    with torch.no_grad():
        current = reference_log_probs(model, batch)
    gen = torch.Generator().manual_seed(1)
    mask = batch["response_mask"].float()
    batch["old_log_probs"] = (current + 0.3 * torch.randn(current.shape, generator=gen)) * mask
    batch["ref_log_prob"] = (current + 0.2 * torch.randn(current.shape, generator=gen)) * mask
    batch["advantages"] = torch.randn(current.shape, generator=gen) * mask
    return batch


def reference_step(model_path: str, batch: dict[str, torch.Tensor]):
    """One PPO step in plain PyTorch: returns (pg_loss, grad_norm, params after the step)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    mask = batch["response_mask"].float()
    n_tokens = mask.sum()
    log_prob = torch.zeros(mask.shape)
    entropy = torch.zeros(mask.shape)
    rows_lp, rows_ent = [], []
    for row in range(BATCH):
        valid = batch["attention_mask"][row].bool()
        ids = batch["input_ids"][row][valid]
        logits = model(input_ids=ids[None]).logits[0, :-1].float()
        n_resp = int(mask[row].sum())
        logits = logits[len(ids) - 1 - n_resp :]
        log_softmax = torch.log_softmax(logits, dim=-1)
        rows_lp.append(log_softmax.gather(-1, ids[-n_resp:, None])[:, 0])
        rows_ent.append(-(log_softmax.exp() * log_softmax).sum(-1))
    log_prob = torch.stack([torch.nn.functional.pad(r, (0, mask.shape[1] - len(r))) for r in rows_lp])
    entropy = torch.stack([torch.nn.functional.pad(r, (0, mask.shape[1] - len(r))) for r in rows_ent])
    adv = batch["advantages"]
    ratio = torch.exp(log_prob - batch["old_log_probs"])
    surrogate = torch.maximum(-adv * ratio, -adv * ratio.clamp(1 - CLIP, 1 + CLIP))
    surrogate = torch.where(adv < 0, torch.minimum(surrogate, -adv * 3.0), surrogate)  # dual clip, c = 3
    pg_loss = (surrogate * mask).sum() / n_tokens
    entropy_mean = (entropy * mask).sum() / n_tokens
    delta = (batch["ref_log_prob"] - log_prob).clamp(-20, 20)
    kl = (torch.exp(delta) - delta - 1).clamp(-10, 10)  # k3 / low_var_kl (Schulman 2020)
    kl_loss = (kl * mask).sum() / n_tokens
    loss = pg_loss - ENT * entropy_mean + KL * kl_loss
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    torch.optim.AdamW(model.parameters(), lr=LR, eps=EPS, weight_decay=WD).step()
    return pg_loss.item(), grad_norm.item(), {k: v.detach().clone() for k, v in model.state_dict().items()}


def _actor_rank(rank, world, model_path, batch, variants):
    """For each (micro_bsz, use_dynamic_bsz, use_remove_padding): a fresh actor, log-probs, one update."""
    return [_one_variant(rank, world, model_path, batch, *variant) for variant in variants]


def _one_variant(rank, world, model_path, batch, micro_bsz, use_dynamic_bsz, use_remove_padding, engine_overrides=None):
    from verl.protocol import DataProto
    from verl.workers.actor import DataParallelPPOActor
    from verl.workers.config import FSDPActorConfig, FSDPEngineConfig, HFModelConfig, OptimConfig
    from verl.workers.engine.fsdp.engine import FSDPEngine

    optim = OptimConfig(lr=LR, weight_decay=WD, override_optimizer_config={"eps": EPS})
    config = FSDPActorConfig(
        ppo_mini_batch_size=BATCH // world,
        ppo_micro_batch_size_per_gpu=micro_bsz,
        use_dynamic_bsz=use_dynamic_bsz,
        ppo_max_token_len_per_gpu=24,
        clip_ratio=CLIP,
        entropy_coeff=ENT,
        use_kl_loss=True,
        kl_loss_coef=KL,
        kl_loss_type="low_var_kl",
        grad_clip=1.0,
        optim=optim,
    )
    model_config = HFModelConfig(path=model_path, use_remove_padding=use_remove_padding)
    engine = FSDPEngine(model_config, FSDPEngineConfig(**(engine_overrides or {})), optim, role="actor").initialize()
    actor = DataParallelPPOActor(config, engine.module, engine.optimizer, use_remove_padding=use_remove_padding)
    data = DataProto.from_dict(tensors=batch, meta_info={"temperature": 1.0}).chunk(world)[rank]
    data.meta_info.update(micro_batch_size=micro_bsz, use_dynamic_bsz=use_dynamic_bsz, max_token_len=24)
    log_probs, entropys = actor.compute_log_prob(data, calculate_entropy=True)
    metrics = actor.update_policy(data)
    params = dict(engine.iter_full_state_dict())
    return {"log_probs": log_probs, "entropys": entropys, "metrics": metrics, "params": params if rank == 0 else None}


@pytest.fixture(scope="module")
def setup():
    path = tiny_model_path("llama")
    batch = make_update_batch(path)
    return path, batch, reference_step(path, batch)


VARIANTS = {  # world size -> [(micro_bsz, use_dynamic_bsz, use_remove_padding)]
    2: [(2, False, True), (1, True, True)],
    1: [(8, False, False)],
}


@pytest.mark.parametrize("world", [2, 1], ids=["2ranks-micro2-rmpad+dynamic", "1rank-micro8-padded"])
def test_update_matches_plain_reference_step(setup, world):
    from transformers import AutoModelForCausalLM

    path, batch, (ref_pg_loss, ref_grad_norm, ref_params) = setup
    per_rank = run_on_ranks(_actor_rank, world, path, batch, VARIANTS[world])
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        expected_log_probs = reference_log_probs(model, batch)
    mask = batch["response_mask"].bool()
    for index, variant in enumerate(VARIANTS[world]):
        results = [rank_results[index] for rank_results in per_rank]
        log_probs = torch.cat([r["log_probs"] for r in results])
        torch.testing.assert_close(log_probs[mask], expected_log_probs[mask], atol=2e-5, rtol=1e-5)
        assert torch.all(log_probs[~mask] == 0)

        metrics = results[0]["metrics"]
        assert metrics["actor/pg_loss"][0] == pytest.approx(ref_pg_loss, rel=1e-4, abs=1e-6), variant
        assert metrics["actor/grad_norm"][0] == pytest.approx(ref_grad_norm, rel=1e-4), variant
        for name, expected in ref_params.items():
            torch.testing.assert_close(results[0]["params"][name], expected, atol=2e-6, rtol=0, msg=name)
        moved = results[0]["params"]["model.layers.0.mlp.up_proj.weight"] - model.model.layers[0].mlp.up_proj.weight
        assert moved.abs().max() > LR / 2  # the step really moved the weights
