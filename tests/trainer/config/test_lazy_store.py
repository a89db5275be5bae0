"""Schemas stored lazily are registered at import and built once, on Hydra's first read."""

from __future__ import annotations

import dataclasses

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

import verl.trainer  # noqa: F401  (registers the root schemas)
from verl.trainer.config.lazy_store import LazyConfigNode, store_lazily


def test_importing_verl_trainer_registers_every_root_schema():
    repo = ConfigStore.instance().repo
    for name in ("ppo_trainer_schema", "sft_trainer_schema", "generation_schema", "evaluation_schema"):
        assert isinstance(repo[f"{name}.yaml"], LazyConfigNode), name
    node = ConfigStore.instance().load("ppo_trainer_schema.yaml").node
    assert isinstance(node, DictConfig) and node.data.train_batch_size > 0


@dataclasses.dataclass
class _Small:
    size: int = 3


def test_node_is_built_on_first_read_once_and_loads_are_independent_copies():
    calls = []

    def build():
        calls.append(1)
        return {"small": dataclasses.asdict(_Small())}

    store_lazily("lazy_store_test_node", build, provider="tests")
    assert calls == []
    first = ConfigStore.instance().load("lazy_store_test_node.yaml")
    first.node.small.size = 7
    second = ConfigStore.instance().load("lazy_store_test_node.yaml")
    assert calls == [1]
    assert second.node.small.size == 3 and second.provider == "tests"
    del ConfigStore.instance().repo["lazy_store_test_node.yaml"]
