"""Ctrl-C: a run interrupted (SIGINT to its process group, as a terminal sends it) mid-rollout and mid-update exits
within 10 s with code 130, names the checkpoint to resume, leaves it intact, and the resumed run's next step has the
metrics of the same step of an uninterrupted run.

The phases are found through the trainer's DEBUG trace (``VERL_LOGGING_LEVEL=DEBUG``: "step N started", "phase gen
started", "phase update_actor started"). The run setup is the kill-and-resume test's (PPO with a critic, sampled HF
rollout) so that a wrong restore shows in the compared metrics.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.files import snapshot as _snapshot
from tests.trainer.main_ppo_runner import COMPARED_KEYS, LiveRun, describe, resume_overrides, run_main_ppo
from verl.utils.checkpoint.manifest import verify_manifest

TRACE = {"VERL_LOGGING_LEVEL": "DEBUG"}


def _interrupt_at(overrides: list[str], workdir: Path, step: int, phase: str) -> LiveRun:
    run = LiveRun(overrides, workdir, TRACE)
    try:
        run.wait_for(rf"step {step} started", rf"phase {phase} started")
        elapsed = run.interrupt()
    finally:
        run.kill()
    assert elapsed < 10, f"exit took {elapsed:.1f}s after SIGINT\n{run.output[-4000:]}"
    assert run.proc.returncode == 130, run.output[-4000:]
    return run


def _assert_same_step(record: dict, reference: dict) -> None:
    for key in COMPARED_KEYS:
        assert record["data"][key] == pytest.approx(reference["data"][key], rel=1e-5, abs=1e-7), key


@pytest.mark.slow
def test_sigint_mid_rollout_and_mid_update_stops_fast_and_resumes_exactly(tmp_path, resume_reference):
    folders = {name: tmp_path / name for name in ("first", "second", "third")}
    for folder in folders.values():
        folder.mkdir()
    checkpoints = tmp_path / "checkpoints"
    reference = resume_reference

    # mid-rollout of step 2: step 1's checkpoint is the one to resume
    first = _interrupt_at(resume_overrides(folders["first"], checkpoints, 1, "auto"), folders["first"], 2, "gen")
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text() == "1"
    assert f"The newest complete checkpoint is {checkpoints / 'global_step_1'}" in first.output
    assert verify_manifest(str(checkpoints / "global_step_1")).intact
    assert [r["step"] for r in first.records()] == [1]
    step_1 = _snapshot(checkpoints / "global_step_1")

    # resumed: step 2 equals the reference's; then interrupted mid-update of step 3
    second = _interrupt_at(
        resume_overrides(folders["second"], checkpoints, 1, "auto"), folders["second"], 3, "update_actor"
    )
    assert "Resuming from checkpoint" in second.output
    records = second.records()
    assert [r["step"] for r in records] == [2], "the interrupted step must not be logged"
    _assert_same_step(records[0], reference[1])
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text() == "2"
    # a global_step_3 the update finished saving before the SIGINT landed may exist; the tracker does not name it
    assert verify_manifest(str(checkpoints / "global_step_2")).intact
    assert _snapshot(checkpoints / "global_step_1") == step_1, "an older checkpoint changed"

    # resumed from step 2: step 3 equals the reference's
    proc, resumed = run_main_ppo(resume_overrides(folders["third"], checkpoints, 1, "auto"), folders["third"])
    assert proc.returncode == 0, describe(proc)
    assert [r["step"] for r in resumed] == [3]
    _assert_same_step(resumed[0], reference[2])
