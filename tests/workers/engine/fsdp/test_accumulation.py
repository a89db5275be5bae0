"""``accumulation``: which FSDP2 units keep their parameters between micro-batches, and what leaving early restores.
The update it speeds up is checked against the hand-written PPO step in ``tests/workers/actor/test_dp_actor.py``."""

from __future__ import annotations

import pytest

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import counting_gathers, rollout_batch, run_on_ranks


def _state(engine) -> dict:
    """Per FSDP unit: whether its parameters are gathered now, and its reshard-after-backward setting."""
    from verl.workers.engine.fsdp.sharding import fsdp_modules, param_groups

    groups = [group for unit in fsdp_modules(engine.module) for group in param_groups(unit)]
    return {"gathered": [g.is_unsharded for g in groups], "after_backward": [g.reshard_after_backward for g in groups]}


def _accumulation_rank(rank, world, model_path):
    import torch

    from verl.workers.config import FSDPEngineConfig, HFModelConfig, OptimConfig
    from verl.workers.engine.fsdp.accumulation import accumulation, keeps_gathered_after_forward
    from verl.workers.engine.fsdp.engine import FSDPEngine
    from verl.workers.engine.fsdp.sharding import fsdp_modules

    model = HFModelConfig(path=model_path, enable_gradient_checkpointing=False)
    out = {}
    for name, reshard in (("kept", False), ("default", True)):
        config = FSDPEngineConfig(reshard_after_forward=reshard)
        engine = FSDPEngine(model, config, OptimConfig(), role="actor").initialize()
        out[name] = {"selected": [keeps_gathered_after_forward(u) for u in fsdp_modules(engine.module)]}
        batch = rollout_batch(batch_size=2)
        seen = []
        with pytest.raises(RuntimeError, match="a micro-batch failed"):
            with accumulation(engine.module, ["first", "second", "third"]) as micro_batches:
                for micro_batch in micro_batches:
                    seen.append(micro_batch)
                    logits = engine.module(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
                    logits.float().mean().backward()
                    out[name]["after_first_backward"] = _state(engine)
                    raise RuntimeError("a micro-batch failed")
        out[name]["seen"] = seen
        out[name]["after_leaving"] = _state(engine)
        out[name]["grad_finite"] = all(
            torch.isfinite(p.grad.full_tensor()).all().item() for p in engine.module.parameters() if p.grad is not None
        )
    return out


def test_units_kept_after_forward_stay_gathered_between_micro_batches_and_leaving_early_reshards_them():
    (result,) = run_on_ranks(_accumulation_rank, 1, tiny_model_path("llama"))
    kept, default = result["kept"], result["default"]
    assert kept["selected"] == [True, True, True]  # two decoder layers and the root
    assert default["selected"] == [False, False, False]
    assert kept["seen"] == default["seen"] == ["first"]
    # not the last micro-batch: the kept units are still gathered after their backward, told not to reshard
    assert kept["after_first_backward"] == {"gathered": [True] * 3, "after_backward": [False] * 3}
    # the default units reshard after backward as FSDP2 does on its own
    assert default["after_first_backward"] == {"gathered": [False] * 3, "after_backward": [True] * 3}
    # leaving on the exception resharded the kept units and put FSDP2's setting back
    assert kept["after_leaving"] == {"gathered": [False] * 3, "after_backward": [True] * 3}
    assert default["after_leaving"] == {"gathered": [False] * 3, "after_backward": [True] * 3}
    assert kept["grad_finite"] and default["grad_finite"]


def _forward_only_rank(rank, world, model_path):
    import torch

    from verl.workers.config import FSDPEngineConfig, HFModelConfig
    from verl.workers.engine.fsdp.accumulation import forward_only
    from verl.workers.engine.fsdp.engine import FSDPEngine

    model = HFModelConfig(path=model_path, enable_gradient_checkpointing=False)
    batch = rollout_batch(batch_size=2)
    out = {}
    for name, reshard in (("kept", False), ("default", True)):
        engine = FSDPEngine(model, FSDPEngineConfig(reshard_after_forward=reshard), None, role="ref").initialize()
        with counting_gathers() as gathers, torch.no_grad(), forward_only(engine.module):
            for _ in range(3):  # three micro-batches
                engine.module(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            out[name] = {"inside": _state(engine)["gathered"]}
        out[name]["gathers"] = sorted(gathers.values())
        out[name]["after"] = _state(engine)["gathered"]
        with pytest.raises(RuntimeError, match="a forward failed"):
            with torch.no_grad(), forward_only(engine.module):
                engine.module(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
                raise RuntimeError("a forward failed")
        out[name]["after_failure"] = _state(engine)["gathered"]
    return out


def test_a_forward_only_pass_gathers_kept_units_once_and_reshards_them_when_it_ends():
    """Without backward FSDP2 never reshards units kept after forward: ``forward_only`` does when the pass ends (or
    fails), so the log-prob or reference pass does not leave the model gathered through the next generation."""
    (result,) = run_on_ranks(_forward_only_rank, 1, tiny_model_path("llama"))
    kept, default = result["kept"], result["default"]
    assert kept["gathers"] == [1, 1, 1] and kept["inside"] == [True] * 3
    assert default["gathers"] == [3, 3, 3] and default["inside"] == [False] * 3
    assert kept["after"] == kept["after_failure"] == [False] * 3
    assert default["after"] == default["after_failure"] == [False] * 3
