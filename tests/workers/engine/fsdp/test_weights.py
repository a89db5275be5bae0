"""The full-weights iterator on one rank: the FSDP2 engine's parameters are DTensors there too, but each rank's local
tensor is already whole, so the iterator yields plain tensors without any DTensor gather, equal to the checkpoint's
(and to its bf16 cast)."""

from __future__ import annotations

import torch
from torch.distributed.tensor import DTensor

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import run_on_ranks


def _one_rank(rank, world, model_path):
    from verl.workers.config import FSDPEngineConfig, HFModelConfig, OptimConfig
    from verl.workers.engine.fsdp.engine import FSDPEngine

    engine = FSDPEngine(HFModelConfig(path=model_path), FSDPEngineConfig(), OptimConfig(lr=1e-2), role="actor")
    engine.initialize()
    weight = engine.module.model.layers[0].mlp.up_proj.weight

    def no_gather(self):
        raise AssertionError("full_tensor called on a rank that holds the whole tensor")

    DTensor.full_tensor = no_gather  # this spawned process only
    full = dict(engine.iter_full_state_dict(bucket_bytes=1 << 12))
    bf16 = dict(engine.iter_full_state_dict(dtype=torch.bfloat16))
    return {
        "is_dtensor": isinstance(weight, DTensor),
        "full": full,
        "bf16": bf16,
        "plain": all(type(t) is torch.Tensor for t in [*full.values(), *bf16.values()]),
    }


def test_one_rank_yields_the_checkpoint_without_gathers():
    from safetensors.torch import load_file

    path = tiny_model_path("llama")
    (out,) = run_on_ranks(_one_rank, 1, path)
    on_disk = load_file(f"{path}/model.safetensors")
    assert out["is_dtensor"] and out["plain"]
    assert set(on_disk) <= set(out["full"])  # (plus lm_head.weight, tied to the embedding, which is not saved)
    for name, tensor in on_disk.items():
        assert torch.equal(out["full"][name], tensor), name
        assert torch.equal(out["bf16"][name], tensor.to(torch.bfloat16)), name
