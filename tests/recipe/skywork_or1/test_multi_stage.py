"""Multi-stage training: stage planning, early validation, and the recipe's script end to end with two 1-step stages
(the second resumes the first's checkpoint with a longer response budget, the adaptive entropy coefficient carried
over)."""

from __future__ import annotations

import pytest
import yaml

from recipe.skywork_or1.multi_stage import MultiStageConfig, StageConfig, load_stages, plan_stages
from tests.recipe.runner import CI_OVERRIDES, RECIPES, run_script, training_records
from tests.support.models import tiny_model_path
from tests.trainer.main_ppo_runner import describe
from verl.trainer.config.validation import ConfigError


def test_plan_accumulates_steps_and_sets_lengths():
    config = MultiStageConfig(
        stages=[StageConfig(max_response_length=8, steps=3), StageConfig(max_response_length=16, steps=2, name="b")]
    )
    plan = plan_stages(config, ["x=1"], save_freq=-1)
    assert [(label, last) for label, last, _ in plan] == [("stage0", 3), ("b", 5)]
    assert plan[1][2] == [
        "x=1",
        "data.max_response_length=16",
        "trainer.total_training_steps=5",
        "trainer.resume_mode=auto",
        "trainer.save_freq=2",
    ]
    assert "trainer.save_freq=3" not in plan_stages(config, [], save_freq=4)[0][2]


def test_shrinking_stages_and_bad_stage_keys_fail_early(tmp_path):
    shrinking = MultiStageConfig(
        stages=[StageConfig(max_response_length=16, steps=1), StageConfig(max_response_length=8, steps=1)]
    )
    with pytest.raises(ConfigError, match=r"stages\[1\].max_response_length=8"):
        plan_stages(shrinking, [], save_freq=-1)
    path = tmp_path / "stages.yaml"
    path.write_text(yaml.safe_dump({"stages": [{"max_response_length": 8, "step": 1}]}))
    with pytest.raises(ConfigError, match="did you mean 'stages\\[0\\].steps'|unknown key 'stages\\[0\\].step'"):
        load_stages(str(path))


SCRIPT = RECIPES / "skywork_or1" / "run_skywork_or1_smollm2_arithmetic.sh"
STAGE_KEYS = ("data.max_response_length", "trainer.total_training_steps", "trainer.resume_mode")


@pytest.mark.slow
def test_two_stages_resume_and_grow_the_response_budget(tmp_path, shared_ray):
    """The recipe's script with a 2-stage file of 1 step each (a later ``--stages`` replaces the script's own)."""
    stages = tmp_path / "stages.yaml"
    stages.write_text(
        yaml.safe_dump(
            {
                "stages": [
                    {"name": "short", "max_response_length": 8, "steps": 1},
                    {"max_response_length": 16, "steps": 1},
                ]
            }
        )
    )
    overrides = [o for o in CI_OVERRIDES if not o.startswith(STAGE_KEYS)] + [
        f"actor_rollout_ref.model.path={tiny_model_path('llama')}",
        "actor_rollout_ref.rollout.name=hf",
        "actor_rollout_ref.rollout.n=2",
        "trainer.test_freq=-1",
        f"trainer.default_local_dir={tmp_path / 'checkpoints'}",
        "actor_rollout_ref.actor.entropy_coeff=0.001",
        "actor_rollout_ref.actor.adaptive_entropy.target_entropy=1000",  # always below: the coefficient rises
        "actor_rollout_ref.actor.adaptive_entropy.delta_ent_coef=0.001",
        "actor_rollout_ref.actor.adaptive_entropy.max_ent_coef=0.01",
        "--stages",
        str(stages),
    ]
    proc, records = run_script(SCRIPT, overrides, tmp_path, extra_env=shared_ray.env())
    assert proc.returncode == 0, describe(proc)
    steps = training_records(records)
    assert [r["step"] for r in steps] == [1, 2]
    assert steps[0]["data"]["response_length/max"] <= 8 < 16
    assert steps[1]["data"]["response_length/max"] <= 16
    # alpha_1 = c_0 = 0.001; the second stage resumes c_1 = 0.002 from the checkpoint (a fresh start would be 0.001)
    assert steps[0]["data"]["actor/entropy_coeff"] == pytest.approx(0.001)
    assert steps[1]["data"]["actor/entropy_coeff"] == pytest.approx(0.002)
    assert "[multi-stage] stage1: steps 2..2" in proc.stdout
    checkpoints = tmp_path / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir() if p.name.startswith("global_step")) == [
        "global_step_1",
        "global_step_2",
    ]
    # the same command again: both stages are done, nothing starts
    again, _ = run_script(SCRIPT, overrides, tmp_path, extra_env=shared_ray.env())
    assert again.returncode == 0, describe(again)
    assert again.stdout.count("already done") == 2
