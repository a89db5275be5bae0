"""Run untrusted Python in a separate process with time, memory, process and output limits.

Layers (each one holds where the others are missing):

1. Namespaces through ``unshare`` when this machine allows them: a new network namespace (no network at all) and
   a PID namespace (killing its first process kills every process the code started). Unprivileged users get a
   user namespace as well; root drops to ``nobody`` inside the sandbox when the interpreter is readable by others.
2. Resource limits set in the sandbox before the code runs: CPU seconds, address space, file size, processes
   (``RLIMIT_NPROC``, which root ignores), open files, no core dumps.
3. An audit hook (:mod:`verl.tools.utils.sandbox_runner`): no writes outside the fresh temporary directory that is
   the working directory, no sockets, no ``exec``/``subprocess``, no ``ctypes`` calls, and no ``fork`` once the
   run holds ``max_processes`` processes.
4. The caller: a wall-clock timeout that kills the whole process group, and at most ``max_output_bytes`` of
   stdout/stderr kept (the rest is read and dropped, so a chatty program cannot block or flood memory).

:func:`run_python` never raises for what the code does: every failure comes back as a :class:`SandboxResult`
whose :meth:`~SandboxResult.message` is shown to the model.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path

logger = logging.getLogger(__name__)

RUNNER = Path(__file__).with_name("sandbox_runner.py")
CODE_FILE = "main.py"
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one run; the tool YAML's ``config`` may set any of them."""

    timeout_s: float = 5.0
    """Wall-clock seconds before the run is killed."""

    cpu_time_s: int = 5
    """CPU seconds of each process (``RLIMIT_CPU``)."""

    memory_mb: int = 512
    """Address space of each process in MiB (``RLIMIT_AS``); larger allocations raise ``MemoryError``."""

    max_output_bytes: int = 4096
    """Bytes kept of stdout (its start) and of stderr (its end, where a traceback ends)."""

    max_file_mb: int = 16
    """Largest file the code may write, in MiB (``RLIMIT_FSIZE``)."""

    max_processes: int = 16
    """Processes the code may have at once (``RLIMIT_NPROC``)."""

    max_open_files: int = 64
    """Open file descriptors per process (``RLIMIT_NOFILE``)."""

    @classmethod
    def from_config(cls, config: dict) -> SandboxLimits:
        """Limits from a tool's ``config`` mapping; keys that are not limits are ignored (``type``, ...)."""
        names = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in config.items() if key in names})


@dataclass
class SandboxResult:
    """What a run produced and how it ended."""

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool = False
    output_truncated: bool = False

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.exit_code == 0

    def message(self, limits: SandboxLimits) -> str:
        """The text for the model: the output, and on failure why the run ended."""
        parts = [self.stdout]
        if self.stderr:
            parts.append(self.stderr)
        if self.output_truncated:
            parts.append(f"[output truncated to {limits.max_output_bytes} bytes]")
        if self.timed_out:
            parts.append(f"Error: the code ran longer than {limits.timeout_s:g} s and was stopped")
        elif self.exit_code is not None and self.exit_code >= 128:
            sig = self.exit_code - 128
            reason = {
                signal.SIGXCPU: f"CPU time limit ({limits.cpu_time_s} s) exceeded",
                signal.SIGKILL: "killed (CPU time or memory limit)",
                signal.SIGXFSZ: f"file size limit ({limits.max_file_mb} MiB) exceeded",
                signal.SIGSEGV: "segmentation fault",
            }.get(sig, f"killed by signal {sig}")
            parts.append(f"Error: {reason}")
        elif self.exit_code not in (0, None) and not self.stderr:
            parts.append(f"Error: exit code {self.exit_code}")
        return "\n".join(part for part in parts if part).strip()


def _probe(command: list[str]) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@functools.cache
def isolation_prefix() -> tuple[str, ...]:
    """The ``unshare`` command that isolates a run here, or ``()`` when namespaces are unavailable (logged once)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        logger.warning("sandbox: no 'unshare' binary; runs are limited by rlimits and the audit hook only")
        return ()
    user = () if os.geteuid() == 0 else ("--user", "--map-root-user")
    prefix = (unshare, *user, "--net", "--pid", "--fork", "--kill-child")
    if _probe([*prefix, "true"]):
        return prefix
    net_only = (unshare, *user, "--net")
    if _probe([*net_only, "true"]):
        logger.warning("sandbox: no PID namespace here; a run's processes are killed by process group")
        return net_only
    logger.warning("sandbox: namespaces are not permitted here; runs are limited by rlimits and the audit hook only")
    return ()


@functools.cache
def interpreter_readable_by_others() -> bool:
    """Whether ``nobody`` could run this interpreter: every folder up to its stdlib and packages is world-searchable
    (a pyenv under a private ``/root`` is not, and then a root sandbox keeps root and relies on the audit hook)."""
    paths = [os.path.realpath(sys.executable), sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]]
    for path in paths:
        current = Path(os.path.realpath(path))
        for folder in [current, *current.parents]:
            try:
                mode = folder.stat().st_mode
            except OSError:
                return False
            if not mode & 0o001 or (folder == current and not mode & 0o004):
                return False
    return True


def _process_budget(limits: SandboxLimits, isolated_pid: bool) -> int:
    """RLIMIT_NPROC counts all processes of the user outside a namespace: allow the ones already running."""
    if isolated_pid or os.geteuid() == 0:
        return limits.max_processes
    uid = os.getuid()
    running = sum(1 for entry in Path("/proc").iterdir() if entry.name.isdigit() and _owned_by(entry, uid))
    return running + limits.max_processes


def _owned_by(entry: Path, uid: int) -> bool:
    try:
        return entry.stat().st_uid == uid
    except OSError:
        return False


async def _drain(stream: asyncio.StreamReader, keep: int, tail: bool = False) -> tuple[bytes, bool]:
    """Read ``stream`` to its end keeping ``keep`` bytes: the first ones, or with ``tail`` the last ones (where a
    traceback ends); returns them and whether anything was dropped."""
    kept = bytearray()
    total = 0
    while chunk := await stream.read(65536):
        total += len(chunk)
        if tail:
            kept = (kept + chunk)[-keep:]
        elif len(kept) < keep:
            kept += chunk[: keep - len(kept)]
    return bytes(kept), total > keep


def _kill_group(process: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


async def run_python(code: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """Run ``code`` as ``__main__`` in a fresh temporary directory under ``limits``; stdin is empty."""
    limits = limits or SandboxLimits()
    workdir = tempfile.mkdtemp(prefix="verl-sandbox-")
    try:
        Path(workdir, CODE_FILE).write_text(code, encoding="utf-8")
        prefix = isolation_prefix()
        runner_limits = {
            "code_file": CODE_FILE,
            "cpu_time_s": limits.cpu_time_s,
            "memory_bytes": limits.memory_mb << 20,
            "max_file_bytes": limits.max_file_mb << 20,
            "max_processes": _process_budget(limits, "--pid" in prefix),
            "session_processes": limits.max_processes,
            "drop_root": interpreter_readable_by_others(),
            "max_open_files": limits.max_open_files,
        }
        env = {
            "PATH": SAFE_PATH,
            "HOME": workdir,
            "TMPDIR": workdir,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        command = [*prefix, sys.executable, "-I", str(RUNNER), workdir, json.dumps(runner_limits)]
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=workdir,
            env=env,
            start_new_session=True,  # one process group to kill on timeout
        )
        readers = asyncio.gather(
            _drain(process.stdout, limits.max_output_bytes),
            _drain(process.stderr, limits.max_output_bytes, tail=True),
        )
        timed_out = False
        try:
            await asyncio.wait_for(process.wait(), timeout=limits.timeout_s)
        except asyncio.TimeoutError:
            timed_out = True
        _kill_group(process)  # also reaps what the code left behind when there is no PID namespace
        await process.wait()
        (stdout, out_cut), (stderr, err_cut) = await readers
        exit_code = process.returncode
        if exit_code is not None and exit_code < 0:  # killed by a signal: the shell's 128 + signal
            exit_code = 128 - exit_code
        return SandboxResult(
            stdout=stdout.decode("utf-8", errors="replace"),
            stderr=stderr.decode("utf-8", errors="replace"),
            exit_code=None if timed_out else exit_code,
            timed_out=timed_out,
            output_truncated=out_cut or err_cut,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
