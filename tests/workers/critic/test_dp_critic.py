"""DataParallelPPOCritic on 2 gloo ranks: values equal a plain HF token-classification forward of each sequence
(right shape, zero outside the response), and the clipped value loss / clip fraction of ``update_critic``
equal a float64 hand computation from those values. With Ulysses sequence parallelism (2 ranks,
``ulysses_sequence_parallel_size=2``, dynamic batch size) values, loss and the clipped gradients of the update
equal the single-process reference (SP=1) as well."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rank_share, rollout_batch, run_on_ranks

BATCH, CLIP_VALUE = 8, 0.05


def _critic_rank(rank, world, model_path, batch, sp=1):
    from verl.workers.config import CriticConfig, CriticModelConfig, OptimConfig
    from verl.workers.critic import DataParallelPPOCritic
    from verl.workers.engine.fsdp.engine import FSDPEngine

    dp = world // sp
    optim = OptimConfig(lr=1e-3)
    model_config = CriticModelConfig(path=model_path, use_remove_padding=True, enable_gradient_checkpointing=False)
    config = CriticConfig(
        model=model_config,
        optim=optim,
        ppo_mini_batch_size=BATCH // dp,
        ppo_micro_batch_size_per_gpu=3,
        use_dynamic_bsz=sp > 1,
        ppo_max_token_len_per_gpu=24,
        cliprange_value=CLIP_VALUE,
        ulysses_sequence_parallel_size=sp,
    )
    engine = FSDPEngine(
        model_config, model_config.fsdp_config, optim, role="critic", ulysses_sequence_parallel_size=sp
    ).initialize()
    critic = DataParallelPPOCritic(
        config, engine.module, engine.optimizer, use_remove_padding=True, ulysses=engine.ulysses
    )
    weights = dict(engine.iter_full_state_dict())
    meta = {"micro_batch_size": 3, "use_dynamic_bsz": sp > 1, "max_token_len": 24}
    data = rank_share(batch, engine.dp_rank, dp, meta)
    values = critic.compute_values(data)
    grads = {}

    def capture_clipped_grads(optimizer, args, kwargs):
        for name, param in engine.module.named_parameters():
            grads[name] = param.grad.full_tensor() if hasattr(param.grad, "full_tensor") else param.grad.clone()

    engine.optimizer.register_step_pre_hook(capture_clipped_grads)
    metrics = critic.update_critic(data)
    out = {"values": values, "metrics": metrics}
    return out | {"weights": weights, "grads": grads} if rank == 0 else out


def critic_batch() -> dict[str, torch.Tensor]:
    batch = rollout_batch(batch_size=BATCH, seed=3)
    mask = batch["response_mask"].float()
    gen = torch.Generator().manual_seed(5)
    batch["values"] = 0.1 * torch.randn(mask.shape, generator=gen) * mask
    batch["returns"] = torch.randn(mask.shape, generator=gen) * mask
    return batch


def test_values_and_clipped_value_loss():
    from transformers import AutoModelForTokenClassification

    path = tiny_model_path("qwen2")
    batch = critic_batch()
    mask = batch["response_mask"].float()
    results = run_on_ranks(_critic_rank, 2, path, batch)

    values = torch.cat([r["values"] for r in results])
    assert values.shape == batch["responses"].shape
    assert torch.all(values[mask == 0] == 0)

    # independent reference: the same weights in a plain single-process HF model, one sequence at a time
    model = AutoModelForTokenClassification.from_pretrained(path, num_labels=1, dtype=torch.float32)
    model.load_state_dict(results[0]["weights"])
    expected = torch.zeros(mask.shape)
    with torch.no_grad():
        for row in range(BATCH):
            valid = batch["attention_mask"][row].bool()
            ids = batch["input_ids"][row][valid]
            n = int(mask[row].sum())
            scores = model(input_ids=ids[None]).logits[0, :, 0]
            expected[row, :n] = scores[len(ids) - 1 - n : len(ids) - 1]
    torch.testing.assert_close(values, expected, atol=1e-5, rtol=1e-5)

    v = expected.double().numpy()
    old = batch["values"].double().numpy()
    ret = batch["returns"].double().numpy()
    m = mask.double().numpy()
    clipped = old + np.clip(v - old, -CLIP_VALUE, CLIP_VALUE)
    per_token = np.maximum((v - ret) ** 2, (clipped - ret) ** 2)
    vf_loss = 0.5 * (per_token * m).sum() / m.sum()
    clipfrac = (((clipped - ret) ** 2 > (v - ret) ** 2) * m).sum() / m.sum()
    metrics = results[0]["metrics"]
    assert 0 < clipfrac < 1  # both branches are exercised
    assert metrics["critic/vf_loss"][0] == pytest.approx(vf_loss, rel=1e-5)
    assert metrics["critic/vf_clipfrac"][0] == pytest.approx(clipfrac, abs=1e-6)
    assert metrics["critic/vpred_mean"][0] == pytest.approx((v * m).sum() / m.sum(), rel=1e-4, abs=1e-6)
    assert metrics["critic/grad_norm"][0] > 0


def reference_value_step(path: str, weights: dict, batch: dict[str, torch.Tensor]):
    """Values ``(bs, R)``, the clipped value loss and its gradients clipped to norm 1, in one plain process."""
    from transformers import AutoModelForTokenClassification

    model = AutoModelForTokenClassification.from_pretrained(path, num_labels=1, dtype=torch.float32)
    model.load_state_dict(weights)
    mask = batch["response_mask"].float()
    values = torch.zeros(mask.shape)
    rows = []
    for row in range(BATCH):
        ids = batch["input_ids"][row][batch["attention_mask"][row].bool()]
        n = int(mask[row].sum())
        scores = model(input_ids=ids[None]).logits[0, :, 0]
        rows.append(torch.nn.functional.pad(scores[len(ids) - 1 - n : len(ids) - 1], (0, mask.shape[1] - n)))
    values = torch.stack(rows)
    old, returns = batch["values"], batch["returns"]
    clipped = old + (values - old).clamp(-CLIP_VALUE, CLIP_VALUE)
    loss = 0.5 * (torch.maximum((values - returns) ** 2, (clipped - returns) ** 2) * mask).sum() / mask.sum()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    return values.detach(), loss.item(), {name: param.grad for name, param in model.named_parameters()}


@pytest.mark.slow
def test_sequence_parallel_values_and_update_match_single_process_reference():
    path = tiny_model_path("qwen2")
    batch = critic_batch()
    mask = batch["response_mask"].bool()
    results = run_on_ranks(_critic_rank, 2, path, batch, 2)
    expected_values, expected_loss, expected_grads = reference_value_step(path, results[0]["weights"], batch)
    for result in results:  # both ranks of the group computed every row
        torch.testing.assert_close(result["values"][mask], expected_values[mask], atol=1e-5, rtol=1e-5)
        assert torch.all(result["values"][~mask] == 0)
    assert results[0]["metrics"]["critic/vf_loss"][0] == pytest.approx(expected_loss, rel=1e-5)
    for name, expected in expected_grads.items():
        # float32 sums over a few hundred tokens in another order: ~n * 2^-24 of the largest entry
        tolerance = 2e-5 * float(expected.abs().max())
        torch.testing.assert_close(results[0]["grads"][name], expected, atol=tolerance, rtol=0, msg=name)
