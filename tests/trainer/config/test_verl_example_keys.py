"""Every key of verl's example scripts works here or fails before Ray starts naming the feature and its issue."""

from __future__ import annotations

import pytest

from tests.trainer.config.verl_example_keys import ENGINE_REFUSED, PINNED, WORKING
from verl.trainer.config.checks import registry_errors
from verl.trainer.config.loader import ConfigError, compose_config, load_config, normalize_overrides
from verl.trainer.config.root import PPOConfig
from verl.trainer.config.validation import check_typed


def _typed(override: str) -> PPOConfig:
    """Compose with one override and check keys, types, allowed values and registered names (cross-field checks
    depend on the rest of a command line, so they are left to the whole-command tests)."""
    typed = check_typed(compose_config([override.replace("$HOME", "/home/user")]), PPOConfig)
    errors = registry_errors(typed)
    if errors:
        raise ConfigError(errors)
    return typed


@pytest.mark.parametrize("override", WORKING)
def test_working_key_is_accepted(override):
    _typed(override)


@pytest.mark.parametrize(("override", "issue"), sorted(PINNED.items()))
def test_pinned_key_names_the_feature_and_its_issue(override, issue):
    with pytest.raises(ConfigError, match=rf"not supported yet: .+ \(issue {issue}\)"):
        _typed(override)


@pytest.mark.parametrize(("override", "engine_args"), sorted(ENGINE_REFUSED.items()))
def test_argument_the_engine_dropped_fails_before_ray(override, engine_args):
    pytest.importorskip("vllm")
    key = override.split("=")[0]
    with pytest.raises(ConfigError, match=rf"{key} is not an argument of {engine_args}"):
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
    ("override", "message"),
    [
        (
            "actor_rollout_ref.rollout.data_parallel_size=2",
            "actor_rollout_ref.rollout.data_parallel_size: not supported yet: data / expert parallelism inside the "
            "rollout engine (issue 14)",
        ),
        (
            "+actor_rollout_ref.rollout.trace.backend=weave",
            "actor_rollout_ref.rollout.trace: not supported yet: agent-loop tracing (rollout.trace) (issue 17)",
        ),
    ],
)
def test_pinned_cli_key_fails_before_ray(override, message, tmp_path):
    """The command line itself: exit code 2, the pin message, and no Ray session started."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", override],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert run.returncode == 2, run.stderr[-2000:]
    assert message in run.stderr
    assert "Nothing was started" in run.stderr
