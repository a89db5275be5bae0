"""Hydra ConfigStore entries built the first time Hydra reads them.

Importing ``verl.trainer`` registers the root schemas (``ppo_trainer_schema`` and the offline ones), and every
process of a run imports it: the Ray workers too, which never compose a config. Building a schema's node
(``OmegaConf.structured`` of the whole dataclass tree) costs about 0.3 s a process; :func:`store_lazily` registers
the name at once and builds the node on Hydra's first read of it (``ConfigStore.load``, which copies the entry and
then reads ``node``), once per process.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from hydra.core.config_store import ConfigNode, ConfigStore
from omegaconf import OmegaConf


class LazyConfigNode(ConfigNode):
    """A :class:`~hydra.core.config_store.ConfigNode` whose ``node`` is ``OmegaConf.structured(build())``, built on
    first read and shared by its copies (``ConfigStore.load`` reads the node of a shallow copy)."""

    def __init__(self, name: str, build: Callable[[], Any], provider: str | None = None):
        self._build = functools.cache(lambda: OmegaConf.structured(build()))
        self._node = None
        super().__init__(name=name, node=None, group=None, package=None, provider=provider)

    @property
    def node(self):
        return self._build() if self._node is None else self._node

    @node.setter
    def node(self, value) -> None:
        self._node = value


def store_lazily(name: str, build: Callable[[], Any], provider: str | None = None) -> None:
    """``ConfigStore.instance().store(name=name, node=build(), provider=provider)``, with ``build`` called when Hydra
    first reads the node instead of now."""
    if not name.endswith(".yaml"):
        name = f"{name}.yaml"
    ConfigStore.instance().repo[name] = LazyConfigNode(name, build, provider)
