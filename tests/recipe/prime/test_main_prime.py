"""End to end: PRIME's CPU script for 2 steps on a tiny model (policy, implicit PRM and its reference)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.recipe.runner import CI_OVERRIDES, RECIPES, run_script, training_records
from tests.support.models import tiny_model_path
from tests.trainer.main_ppo_runner import assert_finite, describe

SCRIPT = RECIPES / "prime" / "run_prime_smollm2_arithmetic.sh"
PRIME_KEYS = {
    "acc",
    "prime/filter_pass_rate",
    "reward_model/dpo_loss",
    "reward_model/grad_norm",
    "reward_model/lr",
    "reward_model/reward",
    "reward_model/raw_reward",
    "reward_model/dpo_acc",
    "reward_model/dpo_acc_before",
    "critic/advantages/mean",
    "actor/pg_loss",
    "timing_s/reward_model",
}


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")
def test_prime_two_steps(tmp_path, shared_ray):
    model = tiny_model_path("llama", hidden_size=128)
    overrides = CI_OVERRIDES + [
        f"actor_rollout_ref.model.path={model}",
        f"reward_model.model.path={model}",
        "actor_rollout_ref.rollout.n=2",
        "reward_model.mini_batch_size=4",
        "reward_model.micro_batch_size_per_gpu=4",
        "reward_model.model.optim.lr=1e-3",
    ]
    proc, records = run_script(SCRIPT, overrides, tmp_path, extra_env=shared_ray.env())
    assert proc.returncode == 0, describe(proc)
    steps = training_records(records)
    assert [r["step"] for r in steps] == [1, 2]
    for record in steps:
        missing = sorted(PRIME_KEYS - record["data"].keys())
        assert not missing, f"step {record['step']} lacks {missing}"
        assert_finite(record)
        # one PRM optimizer step per step on 4 prompts x 2 responses: a real gradient
        assert record["data"]["reward_model/grad_norm"] > 0
        assert record["data"]["reward_model/lr"] == pytest.approx(1e-3)
    # the PRM trained at step 1 scores the step-2 batch differently from its initial copy (the reference): the
    # implicit reward (its log-ratio to the frozen reference) is no longer zero
    assert abs(steps[1]["data"]["reward_model/raw_reward"]) > 0
