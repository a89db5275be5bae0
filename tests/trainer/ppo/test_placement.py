"""Split placement from ``trainer.placement``: pools, which group runs where, and the early errors."""

from __future__ import annotations

import pytest

from verl.trainer.config.loader import ConfigError, load_config
from verl.trainer.ppo.placement import (
    GLOBAL_POOL,
    build_resource_pool_manager,
    group_name,
    pool_of,
    pool_world_size,
    resource_pool_spec,
)
from verl.trainer.ppo.utils import Role

CRITIC_POOL = [
    "algorithm.adv_estimator=gae",
    "trainer.n_gpus_per_node=2",
    "trainer.placement.pools={critic_pool:[1]}",
    "trainer.placement.roles={critic:critic_pool}",
]


def test_default_is_one_global_pool():
    config = load_config([])
    assert resource_pool_spec(config) == {GLOBAL_POOL: [1]}
    assert pool_of(config, "critic") == GLOBAL_POOL


def test_critic_on_its_own_pool():
    config = load_config(CRITIC_POOL)
    assert resource_pool_spec(config) == {GLOBAL_POOL: [2], "critic_pool": [1]}
    assert pool_world_size(config, "critic") == 1
    assert pool_world_size(config, "actor_rollout") == 2
    manager = build_resource_pool_manager(config, {Role.ActorRollout: object, Role.Critic: object})
    assert manager.mapping == {Role.ActorRollout: GLOBAL_POOL, Role.Critic: "critic_pool"}
    assert manager.resource_pool_spec == {GLOBAL_POOL: [2], "critic_pool": [1]}
    assert manager.get_n_gpus() == 3


def test_unused_pools_are_not_reserved():
    config = load_config(CRITIC_POOL)
    manager = build_resource_pool_manager(config, {Role.ActorRollout: object})
    assert manager.resource_pool_spec == {GLOBAL_POOL: [2]}


def test_group_names_of_roles():
    assert group_name(Role.ActorRollout) == "actor_rollout"
    assert group_name(Role.RefPolicy) == "ref"
    assert group_name("teacher") == "teacher"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["trainer.placement.roles={critic:nowhere}"], "'nowhere' is not a pool"),
        (["trainer.placement.pools={p:[1]}", "trainer.placement.roles={critic2:p}"], "worker group 'critic2'"),
        (["trainer.placement.pools={p:[0]}", "trainer.placement.roles={critic:p}"], "positive process count"),
        (["trainer.placement.pools={p:[1]}"], "host no worker group"),
        (["trainer.placement.pools={global_pool:[2]}", "trainer.placement.roles={critic:global_pool}"], "redefine"),
        (
            [
                "actor_rollout_ref.model.lora_rank=8",
                "trainer.placement.pools={p:[1]}",
                "trainer.placement.roles={ref:p}",
            ],
            "with LoRA",
        ),
    ],
)
def test_bad_placements_fail_naming_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides)


def test_batch_arithmetic_follows_the_critics_pool():
    # 256 prompts x 1 response = 256 sequences (verl's defaults); a critic pool of 3 cannot split the critic's
    # mini-batch evenly
    overrides = [
        "algorithm.adv_estimator=gae",
        "trainer.placement.pools={critic_pool:[3]}",
        "trainer.placement.roles={critic:critic_pool}",
    ]
    with pytest.raises(ConfigError, match="critic.ppo_mini_batch_size"):
        load_config(overrides)
