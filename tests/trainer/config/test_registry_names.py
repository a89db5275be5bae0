"""The names read from the registries' source match the live registries after import."""

from __future__ import annotations

import pytest

from verl.trainer.config.registry_names import static_names


@pytest.mark.parametrize(
    ("registry", "module", "attribute"),
    [
        ("adv_estimator", "verl.trainer.ppo.core_algos", "ADV_ESTIMATOR_REGISTRY"),
        ("policy_loss", "verl.trainer.ppo.core_algos", "POLICY_LOSS_REGISTRY"),
        ("reward_manager", "verl.workers.reward_manager", "REWARD_MANAGER_REGISTRY"),
    ],
)
def test_static_names_match_live_registry(registry, module, attribute):
    live = getattr(pytest.importorskip(module), attribute, None)
    if live is None:
        from verl.trainer.ppo.algos import registry as algos_registry
        from verl.workers.reward_manager import registry as rm_registry

        live = getattr(algos_registry, attribute, None) or getattr(rm_registry, attribute)
    assert static_names(registry) == frozenset(live)


def test_rollout_names_read_from_source_are_the_builtin_backends():
    # the decorators in verl/workers/rollout name exactly the backends the registry imports lazily (no engine import)
    from verl.workers.rollout.registry import _BUILTIN_MODULES

    assert static_names("rollout") == frozenset(_BUILTIN_MODULES) == frozenset({"hf", "vllm", "sglang"})
