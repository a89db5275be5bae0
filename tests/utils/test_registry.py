"""The generic registry: names found in source match the live registrations, lookups import lazily, pins name
their issue, and a user registration counts at once."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from verl.utils.registry import Registry

REGISTRIES = [
    ("verl.trainer.ppo.algos.registry", "ADV_ESTIMATOR_REGISTRY"),
    ("verl.trainer.ppo.algos.registry", "POLICY_LOSS_REGISTRY"),
    ("verl.workers.reward_manager.registry", "REWARD_MANAGER_REGISTRY"),
    ("verl.workers.rollout.registry", "ROLLOUT_REGISTRY"),
    ("verl.workers.engine.registry", "ENGINE_REGISTRY"),
    ("verl.utils.tracking", "LOGGER_REGISTRY"),
    ("verl.model_merger.base_model_merger", "MERGER_BACKENDS"),
]


@pytest.mark.parametrize(("module", "attribute"), REGISTRIES, ids=[a for _, a in REGISTRIES])
def test_static_names_match_live_registrations(module, attribute):
    registry = getattr(importlib.import_module(module), attribute)
    if attribute == "ROLLOUT_REGISTRY":
        pytest.importorskip("vllm")
    importable = set()
    for name, entry in registry.static_entries().items():
        try:
            importlib.import_module(entry.module)
        except ImportError:  # an optional backend (megatron-core, sglang) not installed here
            continue
        importable.add(name)
    built_in = {name for name, obj in registry._entries.items() if obj.__module__.startswith(registry.package)}
    assert importable == built_in, "every built-in registration is found in source, and only those"


def test_validation_reads_registries_without_torch():
    code = (
        "import sys\n"
        "from verl.trainer.config.loader import load_config\n"
        "load_config(['algorithm.adv_estimator=gae', 'actor_rollout_ref.rollout.name=hf'])\n"
        "assert 'torch' not in sys.modules, 'validation imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_static_metadata_and_parameters():
    from verl.trainer.ppo.algos.registry import ADV_ESTIMATOR_REGISTRY

    assert "values" in ADV_ESTIMATOR_REGISTRY.params("gae")
    assert ADV_ESTIMATOR_REGISTRY.info("grpo") == {"group_baseline": True}
    from verl.utils.tracking import LOGGER_REGISTRY

    assert LOGGER_REGISTRY.info("wandb") == {"requires": "wandb"}


def test_register_lookup_pin_and_unknown():
    registry: Registry = Registry("widget", "widgets.name", package="verl.no_such_package")
    registry.pin("big", "big widgets", issue=99)

    @registry.register("small", colour="red")
    def small(size: int, **kwargs):
        return size

    assert registry.get("small") is small and "small" in registry and registry.names() == ["small"]
    assert registry.info("small") == {"colour": "red"} and registry.params("small") == {"size"}
    assert registry.error("small") is None
    assert registry.error("big") == "widgets.name='big': not supported yet: big widgets (issue 99)"
    with pytest.raises(NotImplementedError, match=r"not supported yet: big widgets \(issue 99\)"):
        registry.get("big")
    with pytest.raises(ValueError, match=r"Unknown widget 'tiny'.*\['small'\]"):
        registry.get("tiny")
    assert registry.get("tiny", None) is None
    with pytest.raises(ValueError, match="already registered"):
        registry.register("small")(lambda size: size)

    @registry.register("big")
    def big(size: int):
        return 10 * size

    assert registry.pinned("big") is None and registry.get("big") is big  # a registration replaces the pin
    assert registry.pop("big") is big and "big" not in registry
