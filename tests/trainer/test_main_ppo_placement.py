"""End to end: split placement for the PPO trainer, the critic on its own resource pool (2 steps, tiny model)."""

from __future__ import annotations

import pytest

from tests.support.models import tiny_model_path
from tests.trainer.main_ppo_runner import assert_finite, describe, run_main_ppo, tiny_overrides


@pytest.mark.slow
def test_ppo_with_the_critic_on_its_own_pool(tmp_path):
    overrides = tiny_overrides(tiny_model_path("llama"), tmp_path, rollout="hf") + [
        "algorithm.adv_estimator=gae",
        "critic.ppo_micro_batch_size_per_gpu=4",
        "trainer.placement.pools={critic_pool:[1]}",
        "trainer.placement.roles={critic:critic_pool}",
    ]
    proc, records = run_main_ppo(overrides, tmp_path)
    assert proc.returncode == 0, describe(proc)
    steps = [r for r in records if r["step"] > 0]
    assert [r["step"] for r in steps] == [1, 2]
    for record in steps:
        assert_finite(record)
        assert {"critic/vf_loss", "critic/values/mean", "actor/pg_loss"} <= record["data"].keys()
    # two resource pools of one process each: the throughput is normalised by both devices
    assert "WorkerDict_actor_rollout" in proc.stdout + proc.stderr and "WorkerDict_critic" in proc.stdout + proc.stderr
