"""MegatronPPOCritic on 2 gloo ranks (TP=2, then PP=2): values equal a plain HF token-classification forward of
each sequence with the same weights, and ``update_critic``'s clipped value loss, clip fraction and grad norm equal
a float64 hand computation / a single-process autograd reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rollout_batch, run_on_ranks
from tests.workers.engine.megatron.helpers import reset_parallel_state

pytest.importorskip("megatron.core")

BATCH, CLIP_VALUE = 8, 0.05


def _critic_rank(rank, world, model_path, batch, layouts):
    from verl.protocol import DataProto
    from verl.workers.config import CriticConfig, CriticModelConfig, McoreEngineConfig, OptimConfig
    from verl.workers.critic.megatron_critic import MegatronPPOCritic
    from verl.workers.engine.megatron.engine import MegatronEngine

    results = []
    for tp, pp in layouts:
        reset_parallel_state()
        optim = OptimConfig(lr=1e-3)
        model_config = CriticModelConfig(path=model_path, enable_gradient_checkpointing=False)
        engine_config = McoreEngineConfig(
            tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, sequence_parallel=False
        )
        config = CriticConfig(
            model=model_config, optim=optim, ppo_mini_batch_size=BATCH, ppo_micro_batch_size_per_gpu=3,
            cliprange_value=CLIP_VALUE,
        )  # fmt: skip
        engine = MegatronEngine(model_config, engine_config, optim, role="critic").initialize()
        critic = MegatronPPOCritic(config, engine)
        weights = dict(engine.iter_full_state_dict())
        data = DataProto.from_dict(tensors=batch, meta_info={"micro_batch_size": 3})
        values = critic.compute_values(data)
        metrics = critic.update_critic(data)
        results.append({"values": values, "metrics": metrics, "weights": weights})
    return results


def _reference(path, weights, batch, mask):
    """Per-sequence HF values with ``weights``, and the grad norm of the token-mean clipped value loss."""
    from transformers import AutoModelForTokenClassification

    model = AutoModelForTokenClassification.from_pretrained(path, num_labels=1, dtype=torch.float32)
    model.load_state_dict(weights)
    values = torch.zeros(mask.shape)
    rows = []
    for row in range(BATCH):
        ids = batch["input_ids"][row][batch["attention_mask"][row].bool()]
        n = int(mask[row].sum())
        scores = model(input_ids=ids[None]).logits[0, :, 0]
        rows.append(torch.nn.functional.pad(scores[len(ids) - 1 - n : len(ids) - 1], (0, mask.shape[1] - n)))
    values = torch.stack(rows)
    old, ret = batch["values"], batch["returns"]
    clipped = old + (values - old).clamp(-CLIP_VALUE, CLIP_VALUE)
    loss = 0.5 * (torch.maximum((values - ret) ** 2, (clipped - ret) ** 2) * mask).sum() / mask.sum()
    loss.backward()
    norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
    return values.detach(), float(norm)


def test_values_and_clipped_value_loss_tp_and_pp():
    path = tiny_model_path("qwen2")
    batch = rollout_batch(batch_size=BATCH, seed=3)
    mask = batch["response_mask"].float()
    gen = torch.Generator().manual_seed(5)
    batch["values"] = 0.1 * torch.randn(mask.shape, generator=gen) * mask
    batch["returns"] = torch.randn(mask.shape, generator=gen) * mask
    per_rank = run_on_ranks(_critic_rank, 2, path, batch, [(2, 1), (1, 2)])
    for index, layout in enumerate(["tp2", "pp2"]):
        results = [r[index] for r in per_rank]
        expected, grad_norm = _reference(path, results[0]["weights"], batch, mask)
        v = expected.double().numpy()
        old, ret, m = batch["values"].double().numpy(), batch["returns"].double().numpy(), mask.double().numpy()
        clipped = old + np.clip(v - old, -CLIP_VALUE, CLIP_VALUE)
        vf_loss = 0.5 * (np.maximum((v - ret) ** 2, (clipped - ret) ** 2) * m).sum() / m.sum()
        clipfrac = (((clipped - ret) ** 2 > (v - ret) ** 2) * m).sum() / m.sum()
        assert 0 < clipfrac < 1, layout  # both branches are exercised
        for result in results:
            torch.testing.assert_close(result["values"], expected, atol=1e-5, rtol=1e-5, msg=layout)
            metrics = result["metrics"]
            assert metrics["critic/vf_loss"][0] == pytest.approx(vf_loss, rel=1e-5), layout
            assert metrics["critic/vf_clipfrac"][0] == pytest.approx(clipfrac, abs=1e-6), layout
            assert metrics["critic/vpred_mean"][0] == pytest.approx((v * m).sum() / m.sum(), rel=1e-4, abs=1e-6)
            assert metrics["critic/grad_norm"][0] == pytest.approx(grad_norm, rel=1e-4), layout
