"""Ray's ``worker_process_setup_hook`` for every process of a ``main_ppo`` job: seeding, then the user's own hooks.

``main_ppo`` registers :func:`setup_worker_process` (:data:`SETUP_HOOK`). It seeds the process
(:func:`verl.trainer.ppo.seeding.seed_worker_process`), then calls each ``module.function`` named, comma-separated, in
``$VERL_WORKER_SETUP_HOOKS`` (:data:`HOOKS_ENV`), in order, with no arguments, before the process runs any task:
instrumentation that must live inside the workers (a profiler around a role's methods, extra logging) goes there
without touching the trainer. A name that does not import or is not callable fails the worker's start naming the
variable and the entry.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable

from verl.trainer.ppo.seeding import seed_worker_process

HOOKS_ENV = "VERL_WORKER_SETUP_HOOKS"
SETUP_HOOK = "verl.trainer.ppo.worker_setup.setup_worker_process"


def load_hook(spec: str) -> Callable[[], object]:
    """``"package.module.function"`` -> the function; a clear error naming :data:`HOOKS_ENV` otherwise."""
    module_name, _, attribute = spec.strip().rpartition(".")
    if not module_name:
        raise ValueError(f"${HOOKS_ENV} entry {spec!r} is not module.function (e.g. mypkg.hooks.install)")
    try:
        hook = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"${HOOKS_ENV} entry {spec!r} does not import: {error}") from error
    if not callable(hook):
        raise ValueError(f"${HOOKS_ENV} entry {spec!r} is not callable")
    return hook


def setup_worker_process() -> None:
    """Seed this process, then run the hooks of ``$VERL_WORKER_SETUP_HOOKS``."""
    seed_worker_process()
    for spec in filter(str.strip, os.environ.get(HOOKS_ENV, "").split(",")):
        load_hook(spec)()
