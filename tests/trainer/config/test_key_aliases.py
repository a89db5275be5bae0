""" "Did you mean" ranks meaning before spelling: names from other trainers point at verl's keys."""

import pytest

from verl.trainer.config.key_aliases import KEY_ALIASES
from verl.trainer.config.loader import ConfigError, check_overrides
from verl.trainer.config.root import PPOConfig
from verl.trainer.config.schema_walk import all_key_paths
from verl.trainer.config.validation import check_typed


def test_every_alias_names_existing_keys():
    leaves = {path.rsplit(".", 1)[-1] for path in all_key_paths(PPOConfig)}
    assert not {alias for alias in KEY_ALIASES if alias in leaves}, "an alias must not be a verl key itself"
    missing = {alias: target for alias, targets in KEY_ALIASES.items() for target in targets if target not in leaves}
    assert not missing


@pytest.mark.parametrize(
    ("override", "suggestion"),
    [
        ("actor_rollout_ref.actor.optim.learning_rate=1e-6", "'actor_rollout_ref.actor.optim.lr'"),
        ("critic.optim.learning_rate=1e-5", "'critic.optim.lr'"),
        ("data.batch_size=8", "'data.train_batch_size'"),
        (
            "trainer.batch_size=8",
            "'data.train_batch_size' or 'actor_rollout_ref.actor.ppo_mini_batch_size' or 'critic.ppo_mini_batch_size'",
        ),
        ("trainer.num_epochs=2", "'trainer.total_epochs'"),
        ("trainer.max_steps=10", "'trainer.total_training_steps'"),
        ("actor_rollout_ref.rollout.num_generations=4", "'actor_rollout_ref.rollout.n'"),
        ("actor_rollout_ref.rollout.max_tokens=256", "'actor_rollout_ref.rollout.response_length'"),
        ("actor_rollout_ref.actor.max_grad_norm=1.0", "'actor_rollout_ref.actor.grad_clip'"),
        ("actor_rollout_ref.model.model_name_or_path=Qwen", "'actor_rollout_ref.model.path'"),
        ("trainer.output_dir=/ckpt", "'trainer.default_local_dir'"),
        ("data.max_prompt_lenght=128", "'data.max_prompt_length'"),  # spelling still works
    ],
)
def test_override_suggestions(override, suggestion):
    with pytest.raises(ConfigError) as info:
        check_overrides([override])
    key = override.split("=")[0]
    assert f"unknown key '{key}' in override '{override}'; did you mean {suggestion}?" in str(info.value)


def test_composed_config_suggestions_use_meaning_too():
    with pytest.raises(ConfigError) as info:
        check_typed({"actor_rollout_ref": {"actor": {"optim": {"learning_rate": 1e-6}}}}, PPOConfig)
    assert (
        "unknown key 'actor_rollout_ref.actor.optim.learning_rate'; did you mean 'actor_rollout_ref.actor.optim.lr'?"
        in (str(info.value))
    )
