"""Suite-wide pytest setup: the ``gpu`` marker skips cleanly without CUDA; one Ray cluster that end-to-end runs
join (:func:`shared_ray`); the run's exit status survives the interpreter's teardown (:func:`_exit_with_status`)."""

import atexit
import os
import sys

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    _EXIT_STATUS.append(int(exitstatus))


def _exit_with_status() -> None:
    """Leave with the session's status once every other exit handler has run (Ray's, the engines'), skipping the
    interpreter's own teardown of the modules and threads the in-process engines left behind: one CI run in about
    twenty (session 25) had all 1767 tests pass and then died with a segfault there, which turned ``make test``
    red. Registered at import, before the engines register theirs, so it runs last."""
    if _EXIT_STATUS:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])


atexit.register(_exit_with_status)


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


_WORLD_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture(autouse=True)
def _restore_world_env():
    """A test that creates a torch.distributed world in this process must not leave its port to later tests.

    ``MASTER_PORT`` left in ``os.environ`` is inherited by every subprocess a later test starts (entry points,
    Ray workers), which then try to listen on a port someone else may hold.
    """
    saved = {key: os.environ.get(key) for key in _WORLD_ENV}
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def shared_ray(tmp_path_factory):
    """A Ray cluster (``ray start --head``) that end-to-end runs join through ``$RAY_ADDRESS`` instead of starting
    their own (``tests/support/ray_cluster.py``); started at its first use, stopped when the session ends."""
    from tests.support.ray_cluster import RayCluster
    from tests.trainer.main_ppo_runner import main_ppo_env

    cwd = tmp_path_factory.mktemp("shared_ray")
    env = main_ppo_env(cwd / "metrics.jsonl", "")
    del env["VERL_FILE_LOGGER_PATH"]  # each run's own reaches its workers through its job's runtime env
    cluster = RayCluster(env, cwd)
    yield cluster
    cluster.stop()
