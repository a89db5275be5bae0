"""Every shipped example's ``main_ppo`` command composes and validates (keys exist, values pass the checks)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.recipe.runner import expanded_command
from verl.trainer.config.loader import check_overrides, compose_config, validate_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTS = sorted(
    [*EXAMPLES.glob("grpo_trainer/*.sh"), *EXAMPLES.glob("ppo_trainer/*.sh"), *EXAMPLES.glob("slurm/*.slurm")]
    + [*EXAMPLES.glob("agent_loop/*.sh")]
    + [*EXAMPLES.glob("reward_model/*.sh")]
    + [p for p in (EXAMPLES.parent / "recipe").glob("*/run_*.sh") if "verl.trainer.main_ppo" in p.read_text()]
    + [*EXAMPLES.glob("skypilot/*.yaml")]
)
ENV = {
    "N_GPUS": "8",
    "GPUS_PER_NODE": "8",
    "SLURM_JOB_NUM_NODES": "2",
    "SKYPILOT_NUM_GPUS_PER_NODE": "8",
    "NUM_NODES": "2",
    "MODEL": "Qwen/Qwen2.5-0.5B-Instruct",
    "PROJECT_DIR": str(EXAMPLES.parent),  # scripts run from the repository root
}


def main_ppo_overrides(text: str, home: str) -> list[str]:
    """The ``key=value`` arguments of the script's ``-m verl.trainer.main_ppo`` command, variables substituted."""
    text = text.replace("\\\n", " ")
    line = next(line for line in text.splitlines() if "verl.trainer.main_ppo" in line)
    args = shlex.split(line.split("verl.trainer.main_ppo", 1)[1])
    env = {**ENV, "HOME": home, "DATA_DIR": f"{home}/data/gsm8k"}
    if "--config-name" in args:  # "--config-name NAME": the name is not an override
        del args[args.index("--config-name") + 1]
    substituted = []
    for arg in args:
        if arg in ("$@", '"$@"') or arg.startswith("--config-name"):
            continue
        arg = re.sub(r"\$\{?(\w+)\}?", lambda m: env[m.group(1)], arg)
        substituted.append(arg)
    return substituted


def config_name(text: str) -> str:
    """The script's ``--config-name`` (``ppo_trainer`` when it has none)."""
    match = re.search(r"--config-name[= ]+['\"]?([\w.]+?)(?:\.yaml)?['\"]?(?:\s|$)", text)
    return match.group(1) if match else "ppo_trainer"


def test_every_example_is_found():
    names = {p.name for p in SCRIPTS}
    assert {"run_qwen2_5-0.5b_gsm8k.sh", "ray_on_slurm.slurm", "verl-grpo.yaml"} <= names


def recipe_main_ppo_overrides(script: Path, home: str) -> list[str]:
    """A recipe script's overrides as bash expands them (recipe scripts source arrays of shared overrides)."""
    args = expanded_command(script, {"HOME": home})
    assert args[:2] == ["-m", "verl.trainer.main_ppo"], args[:2]
    return args[2:]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_example_command_validates(script, tmp_path):
    if script.parent.parent.name == "recipe":
        overrides = recipe_main_ppo_overrides(script, str(tmp_path))
    else:
        overrides = main_ppo_overrides(script.read_text(), str(tmp_path))
    assert any(o.startswith("algorithm.adv_estimator=") for o in overrides)
    check_overrides(overrides)
    config = validate_config(compose_config(overrides, config_name=config_name(script.read_text())))
    assert config.trainer.total_training_steps is None or "smollm2" in script.name
