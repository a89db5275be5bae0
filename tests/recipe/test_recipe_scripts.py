"""Every recipe script's command composes and validates with its recipe's config (keys exist, checks pass), and the
recipe table of recipe/README.md lists every recipe."""

from __future__ import annotations

import pytest

from recipe.entry_points import compose_entry
from recipe.skywork_or1.multi_stage import load_stages, plan_stages
from tests.recipe.runner import RECIPES, script_command

SCRIPTS = sorted(p for p in RECIPES.glob("*/run_*.sh") if "verl.trainer.main_ppo" not in p.read_text())
ENV = {"STUDENT": "/models/student"}


def test_recipe_scripts_are_found():
    names = {p.name for p in SCRIPTS}
    assert {
        "run_one_step_off_smollm2_arithmetic.sh",
        "run_prime_smollm2_arithmetic.sh",
        "run_on_policy_distill_smollm2_arithmetic.sh",
        "run_spin_smollm2_arithmetic.sh",
        "run_skywork_or1_smollm2_arithmetic.sh",
    } <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recipe_script_composes_and_validates(script):
    module, overrides = script_command(script, ENV)
    if module == "recipe.skywork_or1.multi_stage":
        stages_file = overrides[overrides.index("--stages") + 1]
        common = [o for o in overrides if o not in ("--stages", stages_file)]
        plan = plan_stages(load_stages(stages_file), common, save_freq=-1)
        assert len(plan) >= 2
        configs = [compose_entry(load_stages(stages_file).entry, stage_overrides) for *_, stage_overrides in plan]
        lengths = [config.data.max_response_length for config in configs]
        assert lengths == sorted(lengths) and lengths[0] < lengths[-1]
        assert [config.trainer.total_training_steps for config in configs] == [last for _, last, _ in plan]
        return
    config = compose_entry(module, overrides)
    assert config.trainer.total_training_steps is not None


def test_readme_lists_every_recipe():
    table = (RECIPES / "README.md").read_text()
    for folder in sorted(p.parent.name for p in RECIPES.glob("*/README.md")):
        assert f"`{folder}/`" in table, f"recipe/README.md does not list {folder}/"
