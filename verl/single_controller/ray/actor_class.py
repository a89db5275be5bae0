"""``RayClassWithInitArgs``: a Ray actor class and its constructor arguments, instantiated per bundle."""

from __future__ import annotations

from typing import Any

import ray
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from verl.single_controller.base.worker_group import ClassWithInitArgs

CONCURRENCY_GROUPS_ATTR = "ray_concurrency_groups"
"""Class attribute ``{group: max_concurrency}`` of a worker whose methods use ``@ray.method(concurrency_group=...)``
(Ray takes the groups only at ``ray.remote`` time)."""


def unwrap_ray_remote(cls: Any) -> type:
    """The Python class behind a ``ray.remote`` actor class (or ``cls`` itself)."""
    return getattr(cls, "__ray_actor_class__", cls)


def concurrency_groups(*classes: type) -> dict[str, int]:
    """The concurrency groups the worker classes declare (largest size wins when two declare one group)."""
    groups: dict[str, int] = {}
    for cls in classes:
        for name, size in (getattr(cls, CONCURRENCY_GROUPS_ATTR, None) or {}).items():
            groups[name] = max(size, groups.get(name, 0))
    return groups


def as_ray_actor_class(cls: type, groups: dict[str, int] | None = None) -> Any:
    """``ray.remote(cls)`` with the concurrency groups of ``cls`` (or ``groups``)."""
    groups = concurrency_groups(cls) if groups is None else groups
    return ray.remote(concurrency_groups=groups)(cls) if groups else ray.remote(cls)


class RayClassWithInitArgs(ClassWithInitArgs):
    """``cls`` (a ``@ray.remote`` actor class, or a plain class that gets wrapped) with ``*args, **kwargs``."""

    def __init__(self, cls: Any, *args, **kwargs) -> None:
        if not hasattr(cls, "__ray_actor_class__"):
            cls = as_ray_actor_class(cls)
        super().__init__(cls, *args, **kwargs)
        self._options: dict[str, Any] = {}
        self._additional_resource: dict[str, float] = {}

    @property
    def user_cls(self) -> type:
        """The worker's Python class."""
        return unwrap_ray_remote(self.cls)

    def set_additional_resource(self, additional_resource: dict[str, float]) -> None:
        """Extra custom resources each actor asks for."""
        self._additional_resource = dict(additional_resource)

    def update_options(self, options: dict[str, Any]) -> None:
        """Extra ``actor.options(...)`` (e.g. ``runtime_env``, ``max_concurrency``)."""
        self._options.update(options)

    def __call__(
        self,
        placement_group,
        placement_group_bundle_idx: int,
        use_gpu: bool = True,
        num_gpus: float = 1,
        sharing_with: Any = None,
        device_name: str = "cuda",
        num_cpus: float | None = None,
        env_vars: dict[str, str] | None = None,
        name: str | None = None,
    ) -> Any:
        """Start one actor on bundle ``placement_group_bundle_idx`` of ``placement_group``; returns its handle."""
        options: dict[str, Any] = {
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                placement_group=placement_group, placement_group_bundle_index=placement_group_bundle_idx
            ),
            "max_restarts": 0,
        }
        if num_cpus is not None:
            options["num_cpus"] = num_cpus
        if use_gpu:
            if device_name == "cuda":
                options["num_gpus"] = num_gpus
            else:
                options["resources"] = {device_name: num_gpus}
        if self._additional_resource:
            options.setdefault("resources", {}).update(self._additional_resource)
        if name is not None:
            options["name"] = name
        options.update({k: v for k, v in self._options.items() if k != "runtime_env"})
        runtime_env = dict(self._options.get("runtime_env", {}))
        if env_vars:
            runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}), **env_vars}
        if runtime_env:
            options["runtime_env"] = runtime_env
        return self.cls.options(**options).remote(*self.args, **self.kwargs)
