"""End to end: on-policy distillation for 2 steps, a 1-layer student from a 2-layer tiny teacher, the teacher on
its own resource pool."""

from __future__ import annotations

import importlib.util

import pytest

from recipe.gkd.make_student import make_student
from tests.recipe.runner import CI_OVERRIDES, RECIPES, run_script, training_records
from tests.support.models import tiny_model_path
from tests.trainer.main_ppo_runner import assert_finite, describe

SCRIPT = RECIPES / "gkd" / "run_on_policy_distill_smollm2_arithmetic.sh"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")
def test_on_policy_distillation_two_steps_with_teacher_on_its_own_pool(tmp_path, shared_ray):
    teacher = tiny_model_path("llama", hidden_size=128)
    student = make_student(teacher, num_layers=1)
    overrides = CI_OVERRIDES + [
        f"actor_rollout_ref.teacher.model.path={teacher}",
        "actor_rollout_ref.teacher.topk=16",
        "actor_rollout_ref.actor.distill.loss_type=jsd",
        "actor_rollout_ref.actor.distill.beta=0.5",
        "actor_rollout_ref.rollout.n=2",
        "trainer.placement.pools={teacher_pool:[1]}",
        "trainer.placement.roles={teacher:teacher_pool}",
    ]
    proc, records = run_script(SCRIPT, overrides, tmp_path, extra_env={"STUDENT": student, **shared_ray.env()})
    assert proc.returncode == 0, describe(proc)
    steps = training_records(records)
    assert [r["step"] for r in steps] == [1, 2]
    for record in steps:
        assert_finite(record)
        data = record["data"]
        assert data["actor/distill_loss"] > 0  # a 1-layer student cannot equal its 2-layer teacher
        assert "timing_s/teacher" in data and "actor/pg_loss" not in data
