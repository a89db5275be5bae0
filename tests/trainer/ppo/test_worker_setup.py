"""Ray's worker setup hook of main_ppo jobs: every worker process is seeded and then runs the hooks named in
$VERL_WORKER_SETUP_HOOKS, before its first task; a bad entry fails naming the variable."""

import os

import pytest
import ray

from verl.trainer.main_ppo import _ray_init_kwargs
from verl.trainer.ppo import worker_setup
from verl.trainer.ppo.seeding import SEED_ENV

CALLS = "VERL_TEST_HOOK_CALLS"


def record_call() -> None:
    """A hook for the test: appends this process's pid to the file named by $VERL_TEST_HOOK_CALLS."""
    with open(os.environ[CALLS], "a") as sink:
        sink.write(f"{os.getpid()}\n")


def test_bad_entries_name_the_variable_and_the_entry():
    with pytest.raises(ValueError, match="VERL_WORKER_SETUP_HOOKS entry 'nodots' is not module.function"):
        worker_setup.load_hook("nodots")
    with pytest.raises(ValueError, match="entry 'verl.no_such_module.f' does not import"):
        worker_setup.load_hook("verl.no_such_module.f")
    with pytest.raises(ValueError, match="entry 'verl.trainer.ppo.worker_setup.HOOKS_ENV' is not callable"):
        worker_setup.load_hook("verl.trainer.ppo.worker_setup.HOOKS_ENV")


def test_hooks_run_in_order_after_seeding(tmp_path, monkeypatch):
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv(CALLS, str(calls))
    monkeypatch.setenv(SEED_ENV, "7")
    monkeypatch.setenv(worker_setup.HOOKS_ENV, f"{__name__}.record_call, {__name__}.record_call")
    worker_setup.setup_worker_process()
    import torch

    drawn = torch.rand(1)
    torch.manual_seed(7)
    assert torch.equal(drawn, torch.rand(1))  # seeded with $VERL_SEED + rank 0
    assert calls.read_text().split() == [str(os.getpid())] * 2


def test_a_ray_worker_of_a_main_ppo_job_runs_the_hooks_before_its_first_task(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    calls = tmp_path / "calls.txt"
    monkeypatch.setenv(worker_setup.HOOKS_ENV, f"{__name__}.record_call")
    monkeypatch.setenv(CALLS, str(calls))  # workers inherit the driver's environment
    config = OmegaConf.create({"ray_kwargs": {"ray_init": {"num_cpus": 1}}, "trainer": {"seed": 1}})
    kwargs = _ray_init_kwargs(config)
    assert kwargs["runtime_env"]["env_vars"][worker_setup.HOOKS_ENV] == f"{__name__}.record_call"

    @ray.remote
    def task() -> tuple[int, list[str]]:
        return os.getpid(), open(os.environ[CALLS]).read().split()

    ray.init(**kwargs)
    try:
        pid, seen = ray.get(task.remote(), timeout=120)
    finally:
        ray.shutdown()
    assert str(pid) in seen  # the hook ran in the task's own process before the task
