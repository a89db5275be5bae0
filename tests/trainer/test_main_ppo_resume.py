"""Kill and resume: a run SIGKILLed after its step-2 checkpoint and relaunched continues from step 2, and its
step 3 has the same metrics as step 3 of an uninterrupted run with the same seed.

Generation uses the HF rollout with sampling (temperature 1): its randomness comes from the worker's torch RNG,
which the checkpoint restores, together with the actor and critic models, their optimizers and LR schedules, and
the dataloader position.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.trainer.main_ppo_runner import (
    COMPARED_KEYS,
    describe,
    kill_processes,
    main_ppo_command,
    main_ppo_env,
    read_records,
    resume_overrides,
    run_main_ppo,
    run_processes,
    short_ray_tmpdir,
)


def _run_until_step_then_kill(overrides: list[str], workdir: Path, step: int, timeout: float = 420) -> int:
    """Start main_ppo in its own process group; SIGKILL the whole group once ``step`` is logged."""
    metrics_file = workdir / "metrics.jsonl"
    proc = subprocess.Popen(
        main_ppo_command(overrides),
        cwd=workdir,
        env=main_ppo_env(metrics_file, short_ray_tmpdir()),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if any(r["step"] == step for r in read_records(metrics_file)):
                processes = run_processes(proc.pid)
                os.killpg(proc.pid, signal.SIGKILL)
                kill_processes(processes)  # the training actor too: it must not save step 3 after the kill
                break
            time.sleep(0.05)
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow
def test_sigkilled_run_resumes_with_identical_next_step(tmp_path, resume_reference):
    killed_dir, resumed_dir = (tmp_path / name for name in ("killed", "resumed"))
    for folder in (killed_dir, resumed_dir):
        folder.mkdir()
    checkpoints = tmp_path / "checkpoints"
    reference = resume_reference

    returncode = _run_until_step_then_kill(resume_overrides(killed_dir, checkpoints, 2, "auto"), killed_dir, step=2)
    assert returncode == -signal.SIGKILL, "the first run finished before it could be killed"
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text() == "2"
    killed = {r["step"]: r["data"] for r in read_records(killed_dir / "metrics.jsonl")}
    assert 3 not in killed
    for key in COMPARED_KEYS:  # same seed, same steps before the kill
        assert killed[2][key] == pytest.approx(reference[1]["data"][key], rel=1e-5, abs=1e-7), key

    proc, resumed = run_main_ppo(resume_overrides(resumed_dir, checkpoints, 2, "auto"), resumed_dir)
    assert proc.returncode == 0, describe(proc)
    assert "Resuming from checkpoint" in proc.stdout
    assert [r["step"] for r in resumed] == [3], "the resumed run must start after the step-2 checkpoint"
    for key in COMPARED_KEYS:
        assert resumed[0]["data"][key] == pytest.approx(reference[2]["data"][key], rel=1e-5, abs=1e-7), key
