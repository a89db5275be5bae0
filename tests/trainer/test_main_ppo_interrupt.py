"""Stopped runs resume exactly. One chain of runs (each run's start-up is most of its time), every run with the
same seed, each resumed from the checkpoint the previous one left:

1. Ctrl-C (SIGINT to its process group, as a terminal sends it) mid-rollout of step 2: exits within 10 s with code
   130, names step 1's checkpoint to resume and leaves it intact;
2. resumed, SIGKILLed (the whole process group) once step 2 is logged: its step-2 checkpoint is complete and its
   step 2 has the metrics of the same step of an uninterrupted run;
3. resumed, Ctrl-C mid-update of step 3: the interrupted step is not logged, the tracker still names step 2, and no
   older checkpoint changed;
4. resumed: its step 3 has the metrics of the same step of an uninterrupted run.

Generation uses the HF rollout with sampling (temperature 1): its randomness comes from the worker's torch RNG,
which the checkpoint restores, together with the actor and critic models (PPO with a critic, so that a wrong restore
of either shows in the compared metrics), their optimizers and LR schedules, and the dataloader position. The phases
are found through the trainer's DEBUG trace (``VERL_LOGGING_LEVEL=DEBUG``: "step N started", "phase gen started",
"phase update_actor started").
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.files import snapshot as _snapshot
from tests.trainer.main_ppo_runner import (
    COMPARED_KEYS,
    LiveRun,
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
from verl.utils.checkpoint.manifest import verify_manifest

TRACE = {"VERL_LOGGING_LEVEL": "DEBUG"}


def _interrupt_at(overrides: list[str], workdir: Path, step: int, phase: str) -> LiveRun:
    """Run main_ppo; SIGINT its process group once ``step`` and then its ``phase`` have started."""
    run = LiveRun(overrides, workdir, TRACE)
    try:
        run.wait_for(rf"step {step} started", rf"phase {phase} started")
        elapsed = run.interrupt()
    finally:
        run.kill()
    assert elapsed < 10, f"exit took {elapsed:.1f}s after SIGINT\n{run.output[-4000:]}"
    assert run.proc.returncode == 130, run.output[-4000:]
    return run


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


def _assert_same_step(record: dict, reference: dict) -> None:
    for key in COMPARED_KEYS:
        assert record["data"][key] == pytest.approx(reference["data"][key], rel=1e-5, abs=1e-7), key


@pytest.mark.slow
def test_sigint_and_sigkill_stop_and_each_run_resumes_exactly(tmp_path, resume_reference, shared_ray):
    folders = {name: tmp_path / name for name in ("first", "killed", "second", "third")}
    for folder in folders.values():
        folder.mkdir()
    checkpoints = tmp_path / "checkpoints"
    reference = resume_reference

    # 1. mid-rollout of step 2: step 1's checkpoint is the one to resume
    first = _interrupt_at(resume_overrides(folders["first"], checkpoints, 1, "auto"), folders["first"], 2, "gen")
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text() == "1"
    assert f"The newest complete checkpoint is {checkpoints / 'global_step_1'}" in first.output
    assert verify_manifest(str(checkpoints / "global_step_1")).intact
    assert [r["step"] for r in first.records()] == [1]
    step_1 = _snapshot(checkpoints / "global_step_1")

    # 2. resumed from step 1: SIGKILLed once step 2 (and its checkpoint) is written; step 2 equals the reference's
    overrides = resume_overrides(folders["killed"], checkpoints, 2, "auto")
    returncode = _run_until_step_then_kill(overrides, folders["killed"], step=2)
    assert returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text() == "2"
    killed = read_records(folders["killed"] / "metrics.jsonl")
    assert [r["step"] for r in killed] == [2], "the resumed run must start after the step-1 checkpoint"
    _assert_same_step(killed[0], reference[1])
    assert verify_manifest(str(checkpoints / "global_step_2")).intact

    # 3. resumed from the killed run's step 2: interrupted mid-update of step 3
    second = _interrupt_at(
        resume_overrides(folders["second"], checkpoints, 1, "auto", ppo_epochs=6), folders["second"], 3, "update_actor"
    )
    assert "Resuming from checkpoint" in second.output
    assert second.records() == [], "the interrupted step must not be logged"
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text() == "2"
    # a global_step_3 the update finished saving before the SIGINT landed may exist; the tracker does not name it
    assert verify_manifest(str(checkpoints / "global_step_2")).intact
    assert _snapshot(checkpoints / "global_step_1") == step_1, "an older checkpoint changed"

    # 4. resumed from step 2: step 3 equals the reference's
    overrides = resume_overrides(folders["third"], checkpoints, 1, "auto")
    proc, resumed = run_main_ppo(overrides, folders["third"], extra_env=shared_ray.env())
    assert proc.returncode == 0, describe(proc)
    assert "Resuming from checkpoint" in proc.stdout
    assert [r["step"] for r in resumed] == [3], "the resumed run must start after the step-2 checkpoint"
    _assert_same_step(resumed[0], reference[2])
