"""Checkpoint bookkeeping: tracker file, resume modes, trainer state with RNG, pruning."""

from __future__ import annotations

import json
import os
import random
import sys

import numpy as np
import pytest
import torch

from tests.support.files import snapshot as _snapshot
from verl.trainer.config.trainer import TrainerConfig
from verl.trainer.main_ppo import LAUNCH_ARGV_ENV
from verl.trainer.ppo import checkpointing


def _trainer_config(root, mode="auto", path=None, on_corrupt="fallback"):
    return TrainerConfig(
        default_local_dir=str(root), resume_mode=mode, resume_from_path=path, on_corrupt_checkpoint=on_corrupt
    )


def test_auto_resume_follows_the_tracker(tmp_path):
    assert checkpointing.resolve_resume_path(_trainer_config(tmp_path)) is None
    for step in (2, 4):
        checkpointing.save_trainer_state(checkpointing.global_step_dir(str(tmp_path), step), {"global_step": step})
    # step 4's folder exists but the tracker still says 2: a crash before the tracker write resumes from 2
    checkpointing.write_tracker(str(tmp_path), 2)
    assert checkpointing.resolve_resume_path(_trainer_config(tmp_path)) == str(tmp_path / "global_step_2")
    checkpointing.write_tracker(str(tmp_path), 4)
    assert (tmp_path / "latest_checkpointed_iteration.txt").read_text() == "4"
    assert checkpointing.resolve_resume_path(_trainer_config(tmp_path)) == str(tmp_path / "global_step_4")
    assert checkpointing.resolve_resume_path(_trainer_config(tmp_path, mode="disable")) is None


def test_resume_path_mode_checks_the_folder(tmp_path):
    with pytest.raises(ValueError, match="resume_from_path"):
        checkpointing.resolve_resume_path(_trainer_config(tmp_path, "resume_path", None))
    with pytest.raises(ValueError, match="global_step_<N>"):
        checkpointing.resolve_resume_path(_trainer_config(tmp_path, "resume_path", str(tmp_path)))
    with pytest.raises(FileNotFoundError):
        checkpointing.resolve_resume_path(_trainer_config(tmp_path, "resume_path", str(tmp_path / "global_step_3")))
    checkpointing.save_trainer_state(str(tmp_path / "global_step_3"), {"global_step": 3})
    path = checkpointing.resolve_resume_path(_trainer_config(tmp_path, "resume_path", str(tmp_path / "global_step_3")))
    assert checkpointing.step_of(path) == 3


def test_trainer_state_restores_rng_streams(tmp_path):
    torch.manual_seed(0), np.random.seed(0), random.seed(0)
    checkpointing.save_trainer_state(str(tmp_path), {"global_step": 7, "dataloader": {"epoch": 1}})
    expected = (torch.rand(3), np.random.rand(3), random.random())
    torch.manual_seed(123), np.random.seed(123), random.seed(123)
    state = checkpointing.load_trainer_state(str(tmp_path))
    assert state["global_step"] == 7 and state["dataloader"] == {"epoch": 1}
    assert torch.equal(torch.rand(3), expected[0])
    assert np.array_equal(np.random.rand(3), expected[1])
    assert random.random() == expected[2]


def test_missing_state_file_is_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match="data.pt"):
        checkpointing.load_trainer_state(str(tmp_path))


def test_prune_keeps_the_newest(tmp_path):
    for step in (1, 2, 10, 3):
        (tmp_path / f"global_step_{step}").mkdir()
    checkpointing.prune_old_checkpoints(str(tmp_path), keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["global_step_10", "global_step_3"]


# ---------------------------------------------------------------- damaged checkpoints


def _save_step(root, step: int) -> str:
    """A checkpoint folder as the trainer writes it: role files, data.pt, the manifest, then the tracker."""
    folder = checkpointing.global_step_dir(str(root), step)
    (root / f"global_step_{step}" / "actor" / "model_optim").mkdir(parents=True)
    (root / f"global_step_{step}" / "actor" / "model_optim" / "__0_0.distcp").write_bytes(bytes(range(256)) * step)
    (root / f"global_step_{step}" / "actor" / "extra_state_rank_0.pt").write_bytes(b"extra" * step)
    checkpointing.save_trainer_state(folder, {"global_step": step})
    checkpointing.write_manifest(folder)
    checkpointing.write_tracker(str(root), step)
    return folder


def test_a_truncated_file_falls_back_to_the_newest_intact_checkpoint(tmp_path, capsys):
    for step in (1, 2, 3):
        _save_step(tmp_path, step)
    (tmp_path / "global_step_2" / "data.pt").write_bytes(b"")  # an older one is damaged too
    shard = tmp_path / "global_step_3" / "actor" / "model_optim" / "__0_0.distcp"
    shard.write_bytes(b"")
    before = _snapshot(tmp_path)
    assert checkpointing.resolve_resume_path(_trainer_config(tmp_path)) == str(tmp_path / "global_step_1")
    out = capsys.readouterr()
    assert "CHECKPOINT DAMAGED" in out.out and "CHECKPOINT DAMAGED" in out.err
    assert f"{shard} has 0 bytes, 768 were saved (truncated or overwritten)" in out.out
    assert f"(also skipped) {tmp_path / 'global_step_2' / 'data.pt'} has 0 bytes" in out.out
    assert f"Resuming from the newest intact checkpoint instead: {tmp_path / 'global_step_1'}" in out.out
    assert _snapshot(tmp_path) == before, "resolving must not change or delete any saved file"


def test_a_missing_file_stops_with_the_command_that_resumes(tmp_path, monkeypatch):
    for step in (1, 2):
        _save_step(tmp_path, step)
    missing = tmp_path / "global_step_2" / "actor" / "extra_state_rank_0.pt"
    missing.unlink()
    before = _snapshot(tmp_path)
    launch = ["data.train_files=/d/train.parquet", "trainer.resume_mode=auto", "trainer.total_epochs=2"]
    monkeypatch.setenv(LAUNCH_ARGV_ENV, json.dumps(launch))
    with pytest.raises(checkpointing.CheckpointError) as info:
        checkpointing.resolve_resume_path(_trainer_config(tmp_path, on_corrupt="stop"))
    message = str(info.value)
    assert f"checkpoint {tmp_path / 'global_step_2'} does not match its manifest" in message
    assert f"{missing} is missing" in message
    command = (
        f"{os.path.basename(sys.executable)} -m verl.trainer.main_ppo data.train_files=/d/train.parquet "
        f"trainer.total_epochs=2 trainer.resume_mode=resume_path trainer.resume_from_path={tmp_path / 'global_step_1'}"
    )
    assert f"The newest intact checkpoint is {tmp_path / 'global_step_1'}; resume from it with:\n  {command}" in message
    assert _snapshot(tmp_path) == before


def test_changed_bytes_are_found_by_checksum_only(tmp_path):
    folder = _save_step(tmp_path, 1)
    shard = tmp_path / "global_step_1" / "actor" / "model_optim" / "__0_0.distcp"
    shard.write_bytes(bytes(reversed(range(256))))
    with pytest.raises(checkpointing.CheckpointError, match="has the saved size but not the saved sha256"):
        checkpointing.resolve_resume_path(_trainer_config(tmp_path))
    sizes_only = _trainer_config(tmp_path)
    sizes_only.checkpoint_checksum = False
    assert checkpointing.resolve_resume_path(sizes_only) == folder


def test_no_intact_checkpoint_left_says_how_to_start_over(tmp_path):
    _save_step(tmp_path, 1)
    (tmp_path / "global_step_1" / "data.pt").unlink()
    with pytest.raises(
        checkpointing.CheckpointError, match="No intact checkpoint is left .*trainer.resume_mode=disable"
    ):
        checkpointing.resolve_resume_path(_trainer_config(tmp_path))


def test_an_explicit_damaged_path_never_falls_back(tmp_path):
    for step in (1, 2):
        _save_step(tmp_path, step)
    (tmp_path / "global_step_2" / "data.pt").write_bytes(b"x")
    path = str(tmp_path / "global_step_2")
    with pytest.raises(checkpointing.CheckpointError, match="newest intact checkpoint is .*global_step_1"):
        checkpointing.resolve_resume_path(_trainer_config(tmp_path, "resume_path", path, on_corrupt="fallback"))


def test_tracker_naming_a_removed_folder_falls_back(tmp_path, capsys):
    for step in (1, 2):
        _save_step(tmp_path, step)
    import shutil

    shutil.rmtree(tmp_path / "global_step_2")
    assert checkpointing.resolve_resume_path(_trainer_config(tmp_path)) == str(tmp_path / "global_step_1")
    assert f"{tmp_path / 'global_step_2'} does not exist" in capsys.readouterr().out


def test_a_checkpoint_without_manifest_is_used_unverified(tmp_path, capsys):
    folder = _save_step(tmp_path, 1)
    os.unlink(os.path.join(folder, "checkpoint_manifest.json"))
    assert checkpointing.resolve_resume_path(_trainer_config(tmp_path)) == folder
    assert "has no manifest" in capsys.readouterr().out


def test_mirror_copies_the_step_folder_then_the_tracker(tmp_path):
    """trainer.default_hdfs_dir: the new global_step_N folder and the tracker appear under the mirror root."""
    root, mirror = tmp_path / "local", tmp_path / "mirror"
    step_dir = checkpointing.global_step_dir(str(root), 3)
    checkpointing.save_trainer_state(step_dir, {"global_step": 3})
    os.makedirs(f"{step_dir}/actor")
    with open(f"{step_dir}/actor/shard.bin", "wb") as f:
        f.write(b"\x00\x01weights")
    checkpointing.write_tracker(str(root), 3)
    checkpointing.mirror_checkpoint(str(root), str(mirror), 3)
    assert (mirror / "global_step_3" / "actor" / "shard.bin").read_bytes() == b"\x00\x01weights"
    assert _snapshot(mirror / "global_step_3") == _snapshot(root / "global_step_3")
    assert (mirror / "latest_checkpointed_iteration.txt").read_text() == "3"
    assert checkpointing.resolve_resume_path(_trainer_config(mirror)) == str(mirror / "global_step_3")


def test_mirror_to_hdfs_without_the_client_names_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `hdfs` command
    checkpointing.save_trainer_state(checkpointing.global_step_dir(str(tmp_path), 1), {"global_step": 1})
    checkpointing.write_tracker(str(tmp_path), 1)
    with pytest.raises(RuntimeError, match="Hadoop client"):
        checkpointing.mirror_checkpoint(str(tmp_path), "hdfs://namenode/ckpt", 1)
