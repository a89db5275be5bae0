"""Runs inside the sandbox process (``python -I sandbox_runner.py <dir> <limits-json>``); user code never imports it.

Order matters: read the code while still privileged, then (as root, when the interpreter is readable by others)
hand the directory to ``nobody`` and drop to it, set the resource limits, install the audit hook, and only then
run the code. The audit hook is the guard where no namespace isolates the process: it refuses writes outside the
sandbox directory, sockets other than Unix sockets, starting other programs (``exec``/``spawn``/``system``/
``subprocess``) and loading C functions through ``ctypes``. ``fork`` stays allowed: ``RLIMIT_NPROC`` bounds it
for non-root users, and the hook refuses a fork once the run's session holds ``max_processes`` processes (root
ignores ``RLIMIT_NPROC``).

When this process is PID 1 of a new PID namespace it forks once and waits: PID 1 ignores signals it has no handler
for (the CPU-time ``SIGXCPU`` included), and when it exits the kernel kills every process left in the namespace.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import socket
import sys
import traceback

NOBODY_ID = 65534
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
PATH_EVENTS = {
    "os.remove": 1,
    "os.rename": 2,
    "os.mkdir": 1,
    "os.rmdir": 1,
    "os.symlink": 2,
    "os.link": 2,
    "os.chmod": 1,
    "os.chown": 1,
    "os.truncate": 1,
    "os.utime": 1,
    "os.mkfifo": 1,
    "os.mknod": 1,
    "shutil.rmtree": 1,
}
"""Audit events that change the file system -> how many leading arguments are paths."""
BLOCKED_EVENTS = (
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "pty.spawn",
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.call_function",
    "os.setuid",
    "os.setgid",
)


def _inside(path: object, root: str) -> bool:
    if isinstance(path, int):  # an already open descriptor
        return True
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return False
    real = os.path.realpath(path)
    return real == root or real.startswith(root + os.sep)


def session_process_count(session: int) -> int:
    """Processes of session ``session`` (from ``/proc/<pid>/stat``; the run's processes share one session)."""
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        count += int(fields[3]) == session  # after "pid (comm)": state, ppid, pgrp, session
    return count


def make_audit_hook(root: str, max_processes: int):
    """The hook that keeps user code inside ``root``, off the network and below ``max_processes`` processes."""
    session = os.getsid(0)

    def hook(event: str, args: tuple) -> None:
        if event == "os.fork":
            if session_process_count(session) >= max_processes:
                raise BlockingIOError(errno.EAGAIN, f"sandbox: process limit ({max_processes}) reached")
        elif event == "open":
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & WRITE_FLAGS
            )
            if writes and path is not None and not _inside(path, root):
                raise PermissionError(f"sandbox: writing outside the sandbox directory is not allowed: {path}")
        elif event in PATH_EVENTS:
            for path in args[: PATH_EVENTS[event]]:
                if path is not None and not _inside(path, root):
                    raise PermissionError(f"sandbox: {event} outside the sandbox directory is not allowed: {path}")
        elif event in ("socket.__new__", "socket.connect", "socket.bind", "socket.sendto"):
            sock = args[0]
            family = args[1] if event == "socket.__new__" else getattr(sock, "family", None)
            if family != socket.AF_UNIX:
                raise PermissionError("sandbox: network access is not allowed")
        elif event.startswith(BLOCKED_EVENTS):
            raise PermissionError(f"sandbox: {event} is not allowed")

    return hook


def _drop_privileges(root: str) -> None:
    """Running as real root: give the directory to ``nobody`` and become it (RLIMIT_NPROC binds only non-root)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            os.chown(name, NOBODY_ID, NOBODY_ID)
    os.setgroups([])
    os.setgid(NOBODY_ID)
    os.setuid(NOBODY_ID)


def _set_limits(limits: dict) -> None:
    cpu = int(limits["cpu_time_s"])
    for name, soft, hard in (
        (resource.RLIMIT_CPU, cpu, cpu + 1),  # SIGXCPU at the soft limit, SIGKILL one second later
        (resource.RLIMIT_AS, limits["memory_bytes"], limits["memory_bytes"]),
        (resource.RLIMIT_FSIZE, limits["max_file_bytes"], limits["max_file_bytes"]),
        (resource.RLIMIT_NPROC, limits["max_processes"], limits["max_processes"]),
        (resource.RLIMIT_NOFILE, limits["max_open_files"], limits["max_open_files"]),
        (resource.RLIMIT_CORE, 0, 0),
    ):
        resource.setrlimit(name, (int(soft), int(hard)))


def _wait_as_init(child: int) -> None:
    """PID 1: reap everything, leave with the child's status (the kernel then kills what is left)."""
    while True:
        pid, status = os.wait()
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            if code < 0:  # killed by a signal: report it the way a shell would
                code = 128 - code
            os._exit(code)


def main() -> None:
    root, limits = os.path.realpath(sys.argv[1]), json.loads(sys.argv[2])
    with open(os.path.join(root, limits["code_file"]), encoding="utf-8") as handle:
        code = handle.read()
    os.chdir(root)
    if os.geteuid() == 0 and limits["drop_root"]:
        _drop_privileges(root)
    _set_limits(limits)
    if os.getpid() == 1:
        child = os.fork()
        if child:
            _wait_as_init(child)
    sys.path[:0] = [root]
    sys.argv = [limits["code_file"]]
    import ctypes  # noqa: F401 - importing it opens the interpreter itself; numpy needs that, later dlopens are refused

    sys.addaudithook(make_audit_hook(root, int(limits["session_processes"])))
    run_user_code(code, limits["code_file"])


def run_user_code(code: str, filename: str) -> None:
    """Run ``code`` as ``__main__``; an uncaught exception prints a traceback of the user's frames only."""
    try:
        exec(
            compile(code, filename, "exec"),
            {"__name__": "__main__", "__file__": filename, "__builtins__": __builtins__},
        )
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - reported to the model, like the interpreter would
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != filename:
            tb = tb.tb_next
        traceback.print_exception(type(exc), exc, tb)
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    main()
