"""Every shipped example's ``main_ppo`` command composes and validates (keys exist, values pass the checks)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from verl.trainer.config.loader import check_overrides, compose_config, validate_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTS = sorted(
    [*EXAMPLES.glob("grpo_trainer/*.sh"), *EXAMPLES.glob("ppo_trainer/*.sh"), *EXAMPLES.glob("slurm/*.slurm")]
    + [p for p in (EXAMPLES.parent / "recipe").glob("*/*.sh") if "verl.trainer.main_ppo" in p.read_text()]
    + [*EXAMPLES.glob("skypilot/*.yaml")]
)
ENV = {
    "N_GPUS": "8",
    "GPUS_PER_NODE": "8",
    "SLURM_JOB_NUM_NODES": "2",
    "SKYPILOT_NUM_GPUS_PER_NODE": "8",
    "NUM_NODES": "2",
    "MODEL": "Qwen/Qwen2.5-0.5B-Instruct",
}


def main_ppo_overrides(text: str, home: str) -> list[str]:
    """The ``key=value`` arguments of the script's ``-m verl.trainer.main_ppo`` command, variables substituted."""
    text = text.replace("\\\n", " ")
    line = next(line for line in text.splitlines() if "verl.trainer.main_ppo" in line)
    args = shlex.split(line.split("verl.trainer.main_ppo", 1)[1])
    env = {**ENV, "HOME": home, "DATA_DIR": f"{home}/data/gsm8k"}
    substituted = []
    for arg in args:
        if arg in ("$@", '"$@"'):
            continue
        arg = re.sub(r"\$\{?(\w+)\}?", lambda m: env[m.group(1)], arg)
        substituted.append(arg)
    return substituted


def test_every_example_is_found():
    names = {p.name for p in SCRIPTS}
    assert {"run_qwen2_5-0.5b_gsm8k.sh", "ray_on_slurm.slurm", "verl-grpo.yaml"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_example_command_validates(script, tmp_path):
    overrides = main_ppo_overrides(script.read_text(), str(tmp_path))
    assert any(o.startswith("algorithm.adv_estimator=") for o in overrides)
    check_overrides(overrides)
    config = validate_config(compose_config(overrides))
    assert config.trainer.total_training_steps is None or "smollm2" in script.name
