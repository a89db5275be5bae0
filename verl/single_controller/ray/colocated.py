"""Colocated roles: several worker classes (actor, rollout, ref, critic, reward model) in one actor per device.

``create_colocated_worker_cls({"actor": RayClassWithInitArgs(...), "critic": ...})`` returns a class whose actor
builds every role inside the same process and exposes role ``r``'s registered method ``m`` as ``r_m``.
``RayWorkerGroup(pool, colocated_cls).spawn(prefix_set=["actor", "critic"])`` then gives one worker group per role.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from functools import wraps

from verl.single_controller.base.decorator import MAGIC_ATTR
from verl.single_controller.base.worker import Worker
from verl.single_controller.ray.actor_class import (
    RayClassWithInitArgs,
    as_ray_actor_class,
    concurrency_groups,
    unwrap_ray_remote,
)


@contextmanager
def _env_var(name: str, value: str):
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def _role_method(role: str, method_name: str, method):
    """A method of the colocated class forwarding to ``self.worker_dict[role].<method_name>``."""

    @wraps(method)
    def forward(self, *args, **kwargs):
        return getattr(self.worker_dict[role], method_name)(*args, **kwargs)

    setattr(forward, MAGIC_ATTR, getattr(method, MAGIC_ATTR))
    return forward


def _bind_workers_method_to_parent(cls: type, role: str, user_defined_cls: type) -> None:
    for method_name in dir(user_defined_cls):
        try:
            method = getattr(user_defined_cls, method_name)
        except AttributeError:
            continue
        if callable(method) and hasattr(method, MAGIC_ATTR):
            setattr(cls, f"{role}_{method_name}", _role_method(role, method_name, method))


def create_colocated_worker_cls(class_dict: dict[str, RayClassWithInitArgs]) -> RayClassWithInitArgs:
    """One actor class hosting every role of ``class_dict`` (role name → class with init args)."""
    role_classes = [unwrap_ray_remote(spec.cls) for spec in class_dict.values()]
    raw = create_colocated_worker_raw_cls(class_dict)
    return RayClassWithInitArgs(cls=as_ray_actor_class(raw, concurrency_groups(*role_classes)))


def create_colocated_worker_raw_cls(class_dict: dict[str, RayClassWithInitArgs]) -> type:
    """The plain (not ``ray.remote``) worker class behind :func:`create_colocated_worker_cls`: it builds every role
    of ``class_dict`` in its ``__init__`` and exposes role ``r``'s registered method ``m`` as ``r_m``."""
    bad = [role for role in class_dict if "_" in role and role.split("_", 1)[0] in class_dict]
    if bad:
        raise ValueError(f"role names {bad} clash with another role's method prefix; rename them")
    role_classes = {role: unwrap_ray_remote(spec.cls) for role, spec in class_dict.items()}
    role_init_args = {role: (spec.args, spec.kwargs) for role, spec in class_dict.items()}

    class WorkerDict(Worker):
        def __init__(self):
            super().__init__()
            self.worker_dict = {}
            for role, role_cls in role_classes.items():
                args, kwargs = role_init_args[role]
                # The host actor already did the rendezvous; the roles only read their rank from the env.
                with _env_var("DISABLE_WORKER_INIT", "1"):
                    self.worker_dict[role] = role_cls(*args, **kwargs)

    for role, role_cls in role_classes.items():
        _bind_workers_method_to_parent(WorkerDict, role, role_cls)
    WorkerDict.__name__ = WorkerDict.__qualname__ = "WorkerDict_" + "_".join(class_dict)
    return WorkerDict
