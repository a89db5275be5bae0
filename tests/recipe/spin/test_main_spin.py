"""End to end: SPIN for 2 steps on a tiny model, the reference refreshed every 2 steps."""

from __future__ import annotations

import importlib.util
import math

import pytest

from tests.recipe.runner import CI_OVERRIDES, RECIPES, run_script, training_records
from tests.support.models import tiny_model_path
from tests.trainer.main_ppo_runner import assert_finite, describe

SCRIPT = RECIPES / "spin" / "run_spin_smollm2_arithmetic.sh"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")
def test_spin_two_steps(tmp_path, shared_ray):
    overrides = CI_OVERRIDES + [
        f"actor_rollout_ref.model.path={tiny_model_path('llama', hidden_size=128)}",
        "actor_rollout_ref.actor.optim.lr=1e-3",
        "algorithm.dpo_beta=0.5",
        "trainer.ref_update_freq=2",
    ]
    proc, records = run_script(SCRIPT, overrides, tmp_path, extra_env=shared_ray.env())
    assert proc.returncode == 0, describe(proc)
    steps = training_records(records)
    assert [r["step"] for r in steps] == [1, 2]
    for record in steps:
        assert_finite(record)
    first, second = steps[0]["data"], steps[1]["data"]
    # step 1: the actor equals its reference, every pair's log-ratio difference is 0 and the loss is log 2
    assert first["actor/dpo_loss"] == pytest.approx(math.log(2), abs=1e-5)
    assert first["actor/reward_margin"] == pytest.approx(0.0, abs=1e-5)
    # step 2: the actor moved at step 1 and the reference (refreshed every 2 steps) did not, so the log-ratios
    # differ from 0 (the step's samples come from the moved actor: their own log-ratio is its KL to the reference)
    assert abs(second["actor/reward_margin"]) > 1e-3
    assert abs(second["actor/dpo_loss"] - math.log(2)) > 1e-4
    assert "timing_s/update_ref" in second and "timing_s/update_ref" not in first
