"""Every key of verl's example scripts works here or fails before Ray starts naming the feature and its issue."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from tests.trainer.config.verl_example_keys import ENGINE_REFUSED, NOT_VERL, PINNED, REFUSED_VALUES, WORKING
from verl.trainer.config.checks import registry_errors
from verl.trainer.config.loader import ConfigError, compose_config, load_config, normalize_overrides
from verl.trainer.config.root import PPOConfig
from verl.trainer.config.validation import check_typed

HOME = "/home/user"


def _typed(override: str) -> PPOConfig:
    """Compose with one override and check keys, types, allowed values and registered names (cross-field checks
    depend on the rest of a command line, so they are left to the whole-command tests)."""
    typed = check_typed(compose_config([override.replace("$HOME", HOME)]), PPOConfig)
    errors = registry_errors(typed)
    if errors:
        raise ConfigError(errors)
    return typed


def _at(node: Any, path: str) -> Any:
    """The value at dotted ``path`` of the typed config (dataclass fields, then free-form dict keys)."""
    for part in path.split("."):
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    return node


def _parsed(override: str) -> tuple[str, Any]:
    """``(key, value)`` of a ``key=value`` override as Hydra parses it (numbers, booleans, lists, null, unquoted)."""
    parsed = OverridesParser.create().parse_overrides([override])[0]
    return parsed.key_or_group, parsed.value()


@pytest.mark.parametrize("override", WORKING)
def test_working_key_is_accepted(override):
    """The value lands where the key says: every current spelling the override stands for (older verl names and
    moved keys are rewritten by ``normalize_overrides``) holds the parsed value in the typed config."""
    typed = _typed(override)
    current = normalize_overrides([override.replace("$HOME", HOME)])
    assert current, f"{override} was dropped"
    for spelling in current:
        key, value = _parsed(spelling)
        landed = _at(typed, key)
        if isinstance(landed, list) and not isinstance(value, list):
            value = [value]  # a single name for a list key (trainer.logger=console) is a one-item list
        assert landed == value, f"{override} (read as {spelling}): the config holds {landed!r}, not {value!r}"


@pytest.mark.parametrize(("override", "issue"), sorted(PINNED.items()))
def test_pinned_key_names_the_feature_and_its_issue(override, issue):
    with pytest.raises(ConfigError, match=rf"not supported yet: .+ \(issue {issue}\)"):
        _typed(override)


@pytest.mark.parametrize(("override", "reason"), sorted(NOT_VERL.items()))
def test_key_verl_never_had_fails_naming_the_key(override, reason):
    """Keys of scripts in forks of verl that verl's own config never had: refused, naming the key and a hint."""
    key = override.lstrip("+").split("=")[0]
    with pytest.raises(ConfigError, match=rf"unknown key '{re.escape(key)}'"):
        _typed(override)


@pytest.mark.parametrize(("override", "message"), sorted(REFUSED_VALUES.items()))
def test_value_this_build_cannot_take_fails_before_ray(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        _typed(override)


@pytest.mark.parametrize(("override", "engine_args"), sorted(ENGINE_REFUSED.items()))
def test_argument_the_engine_dropped_fails_before_ray(override, engine_args):
    pytest.importorskip("vllm")
    key = override.split("=")[0].lstrip("+")
    with pytest.raises(ConfigError, match=re.escape(f"{key} is not an argument of {engine_args}")):
        load_config([override, "actor_rollout_ref.rollout.name=vllm"])


def test_older_spellings_land_on_their_current_keys():
    typed = _typed("actor_rollout_ref.model.use_rmpad=True")
    assert typed.actor_rollout_ref.model.use_remove_padding is True
    typed = _typed("critic.model.fsdp_config.grad_offload=True")
    assert typed.critic.model.fsdp_config.offload_policy is True
    typed = _typed("reward_model.sandbox_fusion_url=http://127.0.0.1:1/run_code")
    assert typed.reward_model.sandbox_fusion.url == "http://127.0.0.1:1/run_code"
    assert normalize_overrides(["+trainer.val_before_train=False", "+reward_model.reward_kwargs.x=1"]) == [
        "trainer.val_before_train=False",
        "+reward_model.reward_kwargs.x=1",
    ]


@pytest.mark.parametrize(
    ("older", "current"),
    [
        # early-2025 verl: a nonzero coefficient alone switched the KL term on
        ("actor_rollout_ref.actor.kl_loss.coef=0.002", ["actor_rollout_ref.actor.kl_loss_coef=0.002",
                                                         "actor_rollout_ref.actor.use_kl_loss=True"]),
        ("algorithm.in_reward_kl.coef=0", ["algorithm.kl_ctrl.kl_coef=0", "algorithm.use_kl_in_reward=False"]),
        ("algorithm.in_reward_kl.type=kl", ["algorithm.kl_penalty=kl"]),
        ("actor_rollout_ref.actor.use_gpg_loss=True", ["actor_rollout_ref.actor.policy_loss.loss_mode=gpg"]),
        ("actor_rollout_ref.actor.use_gpg_loss=False", []),
        # verl's engine-worker fsdp_config repeats role keys; the critic's fsdp_config sits under model
        ("critic.model.fsdp_config.strategy=fsdp2", ["critic.strategy=fsdp2"]),
        ("actor_rollout_ref.ref.fsdp_config.entropy_checkpointing=True",
         ["actor_rollout_ref.ref.entropy_checkpointing=True"]),
        ("actor_rollout_ref.ref.param_offload=True", ["actor_rollout_ref.ref.megatron.param_offload=True"]),
        ("trainer.val_generations_to_log_to_wandb=4", ["trainer.log_val_generations=4"]),
        ("critic.optim.lr_decay_style=cosine", ["critic.optim.lr_scheduler_type=cosine"]),
    ],
)  # fmt: skip
def test_older_spelling_is_read_as_the_current_keys(older, current):
    assert normalize_overrides([older]) == current


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "actor_rollout_ref.rollout.data_parallel_size=2",
            "actor_rollout_ref.rollout.data_parallel_size: not supported yet: data / expert parallelism inside the "
            "rollout engine (issue 14)",
        ),
        (
            "profile.options.with_stack=False",
            "profile: not supported yet: the step profiler (nsys / torch / NPU profiling of the workers) (issue 15)",
        ),
        (
            "+actor_rollout_ref.rollout.trace.backend=weave",
            "actor_rollout_ref.rollout.trace: not supported yet: agent-loop tracing (rollout.trace) (issue 17)",
        ),
    ],
)
def test_pinned_cli_key_fails_before_ray(override, message, tmp_path):
    """The command line itself: exit code 2, the pin message, and no Ray session started."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    checkout = str(Path(__file__).resolve().parents[3])  # this checkout's verl, whatever the venv has installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")]))}
    run = subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", override],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert run.returncode == 2, run.stderr[-2000:]
    assert message in run.stderr
    assert "Nothing was started" in run.stderr
