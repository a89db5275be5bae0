"""FSDPEngine alone on 2 gloo ranks: parameters are really sharded, the full-weights iterator returns the
checkpoint's tensors in HF naming, gradient checkpointing leaves gradients unchanged, a non-finite gradient
skips the step; plus the LR schedule and remove-padding packing against hand-worked values."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributed.tensor import DTensor

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rollout_batch, run_on_ranks


def _engine(model_path, grad_ckpt=False):
    from verl.workers.config import FSDPEngineConfig, HFModelConfig, OptimConfig
    from verl.workers.engine.fsdp.engine import FSDPEngine

    model_config = HFModelConfig(path=model_path, enable_gradient_checkpointing=grad_ckpt)
    return FSDPEngine(model_config, FSDPEngineConfig(), OptimConfig(lr=1e-2), role="actor").initialize()


def _loss(engine, batch):
    from verl.workers.engine.fsdp.forward import forward_log_probs

    log_probs, _ = forward_log_probs(
        engine.module, batch["input_ids"], batch["attention_mask"], batch["position_ids"], use_remove_padding=True
    )
    return -(log_probs * batch["attention_mask"]).sum() / batch["attention_mask"].sum()


def _engine_rank(rank, world, model_path):
    out = {}
    engine = _engine(model_path)
    weight = engine.module.model.layers[0].mlp.up_proj.weight
    out["is_dtensor"] = isinstance(weight, DTensor)
    out["local_rows"] = weight.to_local().shape[0]
    out["full"] = dict(engine.iter_full_state_dict(bucket_bytes=1 << 12))
    out["bf16_dtypes"] = {t.dtype for _, t in engine.iter_full_state_dict(dtype=torch.bfloat16)}

    batch = rollout_batch(batch_size=4, seed=rank)
    engine.train_mode()
    _loss(engine, batch).backward()
    plain_grads = {n: p.grad.full_tensor() for n, p in engine.module.named_parameters()}
    engine.zero_grad()
    ckpt_engine = _engine(model_path, grad_ckpt=True)
    ckpt_engine.train_mode()
    _loss(ckpt_engine, batch).backward()
    out["grad_ckpt_max_diff"] = max(
        (p.grad.full_tensor() - plain_grads[n]).abs().max().item() for n, p in ckpt_engine.module.named_parameters()
    )

    # a NaN gradient: the step is skipped and the weights stay as they were
    before = weight.full_tensor().clone()
    _loss(engine, batch).backward()
    weight.grad.to_local().fill_(float("nan"))
    out["nan_grad_norm"] = engine.clip_and_step()
    out["unchanged_after_nan"] = torch.equal(weight.full_tensor(), before)
    _loss(engine, batch).backward()
    out["finite_grad_norm"] = engine.clip_and_step()
    out["changed_after_step"] = not torch.equal(weight.full_tensor(), before)

    # clipping: with SGD(lr=1) the step moves the weights by exactly the clipped gradient (norm = max_norm)
    from verl.workers.engine.fsdp.optim import clip_grad_norm_and_step

    params = [p for p in engine.module.parameters() if p.requires_grad]
    start = [p.full_tensor().clone() for p in params]
    _loss(engine, batch).backward()
    out["sgd_grad_norm"] = clip_grad_norm_and_step(engine.module, torch.optim.SGD(params, lr=1.0), max_norm=0.01)
    deltas = [p.full_tensor() - s for p, s in zip(params, start)]
    out["sgd_step_norm"] = torch.linalg.vector_norm(torch.cat([d.flatten() for d in deltas])).item()
    return out


def test_engine_sharding_weights_and_steps():
    from safetensors.torch import load_file

    path = tiny_model_path("llama")
    results = run_on_ranks(_engine_rank, 2, path)
    on_disk = load_file(f"{path}/model.safetensors")
    for out in results:
        assert out["is_dtensor"] and out["local_rows"] == 64  # 128 rows of up_proj split over 2 ranks
        for name, tensor in on_disk.items():
            assert torch.equal(out["full"][name], tensor), name
        assert out["bf16_dtypes"] == {torch.bfloat16}
        assert out["grad_ckpt_max_diff"] < 1e-6
        assert math.isnan(out["nan_grad_norm"]) and out["unchanged_after_nan"]
        assert math.isfinite(out["finite_grad_norm"]) and out["changed_after_step"]
        assert out["sgd_grad_norm"] > 0.01 and out["sgd_step_norm"] == pytest.approx(0.01, rel=1e-3)


@pytest.mark.parametrize(
    "kind, warmup, expected",
    [
        ("constant", 2, [0.0, 0.5, 1.0, 1.0, 1.0]),
        # cosine to min_lr_ratio 0.1 over steps 2..6: 0.1 + 0.9 * 0.5 * (1 + cos(pi * p)), p = (t - 2) / 4
        ("cosine", 2, [0.0, 0.5, 1.0, 0.1 + 0.45 * (1 + math.cos(math.pi / 4)), 0.55]),
    ],
)
def test_lr_schedule(kind, warmup, expected):
    from verl.workers.config import OptimConfig
    from verl.workers.engine.fsdp.optim import lr_lambda

    config = OptimConfig(
        lr=1.0, lr_warmup_steps=warmup, total_training_steps=6, lr_scheduler_type=kind, min_lr_ratio=0.1
    )
    multiplier = lr_lambda(config)
    assert [multiplier(t) for t in range(5)] == pytest.approx(expected)


def test_warmup_ratio_and_bad_schedule():
    from verl.workers.config import OptimConfig
    from verl.workers.engine.fsdp.optim import lr_lambda, num_warmup_steps

    assert num_warmup_steps(OptimConfig(lr_warmup_steps_ratio=0.25, total_training_steps=8)) == 2
    with pytest.raises(ValueError, match="lr_scheduler_type"):
        lr_lambda(OptimConfig(lr_scheduler_type="linear"))


def test_pack_and_unpack_round_trip():
    from verl.workers.engine.fsdp.packing import pack

    batch = rollout_batch(batch_size=3, seed=2)
    packed = pack(batch["input_ids"], batch["attention_mask"], batch["position_ids"])
    lengths = batch["attention_mask"].sum(-1)
    assert packed.input_ids.shape == (1, int(lengths.sum()))
    assert packed.cu_seqlens.tolist() == [0, *torch.cumsum(lengths, 0).tolist()]
    # positions restart at 0 for every sequence
    starts = packed.cu_seqlens[:-1].long()
    assert torch.all(packed.position_ids[0, starts] == 0)
    restored = packed.unpack(packed.input_ids[0])
    assert torch.equal(restored, batch["input_ids"] * batch["attention_mask"])
