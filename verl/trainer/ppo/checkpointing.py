"""Where checkpoints live, which one to resume, and the trainer's own state (``data.pt``).

Layout under ``trainer.default_local_dir``::

    global_step_{N}/actor/       written by the actor worker group
    global_step_{N}/critic/      written by the critic worker group (when there is a critic)
    global_step_{N}/data.pt      dataloader position, KL coefficient, RNG states, reward history
    global_step_{N}/checkpoint_manifest.json   every file above with its size and sha256, written after them
    latest_checkpointed_iteration.txt   N, replaced atomically after everything above is on disk

Because the tracker file is written last, a run killed while saving resumes from the previous complete
checkpoint. Because the manifest lists what was saved, a checkpoint damaged afterwards (a truncated or removed file)
is found on resume, named, and skipped for the newest intact one or reported with the command that resumes from it
(``trainer.on_corrupt_checkpoint``).
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import shutil
import sys
import tempfile
from typing import Any

import numpy as np
import torch

from verl.utils.checkpoint.manifest import Verification, verify_manifest, write_manifest

__all__ = [
    "CHECKPOINT_TRACKER",
    "CheckpointError",
    "resume_command",
    "write_manifest",
    "find_latest_ckpt_path",
    "global_step_dir",
    "load_trainer_state",
    "prune_old_checkpoints",
    "resolve_resume_path",
    "rng_state",
    "save_trainer_state",
    "set_rng_state",
    "step_of",
    "write_tracker",
]

CHECKPOINT_TRACKER = "latest_checkpointed_iteration.txt"
TRAINER_STATE_FILE = "data.pt"
_STEP_DIR = re.compile(r"global_step_(\d+)$")


def global_step_dir(root: str, global_step: int) -> str:
    return os.path.join(root, f"global_step_{global_step}")


def step_of(path: str) -> int:
    """The N of a ``.../global_step_N`` folder; fails naming the path otherwise."""
    match = _STEP_DIR.search(os.path.normpath(path))
    if match is None:
        raise ValueError(f"trainer.resume_from_path={path!r} must point at a 'global_step_<N>' checkpoint folder")
    return int(match.group(1))


def write_tracker(root: str, global_step: int) -> None:
    """Atomically replace ``latest_checkpointed_iteration.txt`` with ``global_step`` (write temp, fsync, rename)."""
    os.makedirs(root, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tracker-", dir=root)
    with os.fdopen(fd, "w") as handle:
        handle.write(str(global_step))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, os.path.join(root, CHECKPOINT_TRACKER))


class CheckpointError(RuntimeError):
    """The checkpoint to resume from is damaged (or missing) and no fallback applies; the message says what to run."""


def mirror_checkpoint(root: str, mirror_root: str, global_step: int) -> None:
    """Copy the folder of ``global_step`` under ``root``, then the tracker file, to the same place under
    ``mirror_root`` (verl's ``trainer.default_hdfs_dir``): a local path, or an ``hdfs://`` URI through the Hadoop
    client (:mod:`verl.utils.hdfs_io`). The tracker goes last, so a reader never finds it naming a partial copy."""
    from verl.utils import hdfs_io

    hdfs_io.makedirs(mirror_root, exist_ok=True)
    step_dir = global_step_dir(root, global_step)
    hdfs_io.copy(step_dir, f"{mirror_root.rstrip('/')}/{os.path.basename(step_dir)}")
    hdfs_io.copy(os.path.join(root, CHECKPOINT_TRACKER), f"{mirror_root.rstrip('/')}/{CHECKPOINT_TRACKER}")


def resume_command(checkpoint: str | None = None) -> str:
    """The command that relaunched this run: the launch overrides, with ``trainer.resume_mode=resume_path
    trainer.resume_from_path=<checkpoint>`` when a checkpoint is given (else as launched, which resumes the latest
    checkpoint under ``trainer.resume_mode=auto``)."""
    from verl.trainer.main_ppo import LAUNCH_ARGV_ENV

    raw = os.environ.get(LAUNCH_ARGV_ENV)
    overrides = json.loads(raw) if raw else ["<your overrides>"]
    if checkpoint is not None:
        overrides = [
            o for o in overrides if not o.lstrip("+").startswith(("trainer.resume_mode=", "trainer.resume_from_path="))
        ]
        overrides += ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={os.path.abspath(checkpoint)}"]
    return shlex.join(
        [os.path.basename(sys.executable) if raw else "python", "-m", "verl.trainer.main_ppo", *overrides]
    )


def _tracked_step(root: str) -> int | None:
    tracker = os.path.join(root, CHECKPOINT_TRACKER)
    if not os.path.exists(tracker):
        return None
    with open(tracker) as handle:
        text = handle.read().strip()
    try:
        return int(text)
    except ValueError:
        raise CheckpointError(
            f"{tracker} holds {text!r}, not a step number; write the step to resume from in it"
        ) from None


def _older_steps(root: str, below: int) -> list[int]:
    """Steps of the ``global_step_*`` folders under ``root`` below ``below``, newest first."""
    steps = (int(match.group(1)) for name in os.listdir(root) if (match := _STEP_DIR.match(name)))
    return sorted((step for step in steps if step < below), reverse=True)


def find_latest_ckpt_path(root: str) -> str | None:
    """The checkpoint folder named by the tracker file under ``root``, or None if there is none yet."""
    step = _tracked_step(root)
    return None if step is None else global_step_dir(root, step)


def _verify(path: str, checksums: bool) -> Verification:
    result = verify_manifest(path, checksums)
    if result.has_manifest or result.problems:
        return result
    if not os.path.exists(os.path.join(path, TRAINER_STATE_FILE)):  # no manifest and no trainer state: incomplete
        result.problems.append(f"{os.path.join(path, TRAINER_STATE_FILE)} is missing")
    return result


def _loud(lines: list[str]) -> None:
    bar = "!" * 100
    text = "\n".join([bar, *lines, bar])
    print(text, flush=True)
    print(text, file=sys.stderr, flush=True)


def _newest_intact(root: str, below: int, checksums: bool) -> tuple[str | None, list[str]]:
    """The newest verified ``global_step_K`` (K < ``below``) under ``root`` and the problems of those skipped."""
    skipped = []
    for step in _older_steps(root, below):
        path = global_step_dir(root, step)
        result = _verify(path, checksums)
        if not result.problems:
            return path, skipped
        skipped.extend(result.problems)
    return None, skipped


def _damaged(path: str, problems: list[str], root: str, trainer_config, allow_fallback: bool) -> str:
    """The checkpoint to use instead of the damaged ``path`` (fallback), or :class:`CheckpointError`."""
    checksums = bool(trainer_config.checkpoint_checksum)
    intact, skipped = _newest_intact(root, step_of(path), checksums)
    damage = "\n".join(f"  - {problem}" for problem in problems)
    if intact is not None and allow_fallback and trainer_config.on_corrupt_checkpoint == "fallback":
        _loud(
            [
                f"CHECKPOINT DAMAGED: {path} does not match its manifest:",
                damage,
                *[f"  - (also skipped) {problem}" for problem in skipped],
                f"Resuming from the newest intact checkpoint instead: {intact} (steps after {step_of(intact)} are "
                "trained again). Nothing was deleted. Set trainer.on_corrupt_checkpoint=stop to stop instead.",
            ]
        )
        return intact
    if intact is not None:
        action = f"The newest intact checkpoint is {intact}; resume from it with:\n  {resume_command(intact)}"
    else:
        action = (
            f"No intact checkpoint is left under {root}; start from scratch with trainer.resume_mode=disable or a new "
            "trainer.default_local_dir (nothing was deleted)."
        )
    raise CheckpointError(f"checkpoint {path} does not match its manifest:\n{damage}\n{action}")


def resolve_resume_path(trainer_config) -> str | None:
    """The verified checkpoint to resume from according to ``trainer.resume_mode``.

    ``disable``: none. ``auto``: the one the tracker file under ``trainer.default_local_dir`` names (none on a fresh
    start); when it does not match its manifest, ``trainer.on_corrupt_checkpoint`` picks the newest intact older one
    or stops. ``resume_path``: ``trainer.resume_from_path`` (a ``global_step_<N>`` folder), which must be intact.
    """
    mode = trainer_config.resume_mode
    if mode == "disable":
        return None
    checksums = bool(trainer_config.checkpoint_checksum)
    if mode == "auto":
        root = trainer_config.default_local_dir
        path = find_latest_ckpt_path(root)
        if path is None:
            return None
        result = _verify(path, checksums)
        if result.problems:
            return _damaged(path, result.problems, root, trainer_config, allow_fallback=True)
        if not result.has_manifest:
            print(f"Checkpoint {path} has no manifest (saved by an older version): resuming without verifying it.")
        return path
    if mode == "resume_path":
        path = trainer_config.resume_from_path
        if not path:
            raise ValueError("trainer.resume_mode=resume_path needs trainer.resume_from_path=<.../global_step_N>")
        step_of(path)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"trainer.resume_from_path={path!r} does not exist")
        result = _verify(path, checksums)
        if result.problems:
            root = os.path.dirname(os.path.abspath(path))
            return _damaged(path, result.problems, root, trainer_config, allow_fallback=False)
        return path
    raise ValueError(f"trainer.resume_mode={mode!r}; choose one of ['auto', 'disable', 'resume_path']")


def rng_state() -> dict[str, Any]:
    """Python, numpy and torch (CPU and CUDA) generator states of this process."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_trainer_state(checkpoint_dir: str, state: dict[str, Any]) -> None:
    """Write ``state`` (plus this process's RNG states) to ``{checkpoint_dir}/data.pt`` via a temp file."""
    os.makedirs(checkpoint_dir, exist_ok=True)
    target = os.path.join(checkpoint_dir, TRAINER_STATE_FILE)
    tmp = target + ".tmp"
    torch.save({**state, "rng": rng_state()}, tmp)
    os.replace(tmp, target)


def load_trainer_state(checkpoint_dir: str) -> dict[str, Any]:
    """Read ``data.pt`` and restore this process's RNG states from it."""
    path = os.path.join(checkpoint_dir, TRAINER_STATE_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing: the checkpoint in {checkpoint_dir} is incomplete")
    state = torch.load(path, weights_only=False)
    set_rng_state(state["rng"])
    return state


def prune_old_checkpoints(root: str, keep: int | None) -> None:
    """Remove all but the newest ``keep`` ``global_step_*`` folders (keep None or <= 0: keep all)."""
    if not keep or keep <= 0 or not os.path.isdir(root):
        return
    steps = sorted(int(m.group(1)) for name in os.listdir(root) if (m := _STEP_DIR.match(name)))
    for step in steps[:-keep]:
        shutil.rmtree(global_step_dir(root, step), ignore_errors=True)
