"""A pool of scorer processes that survives scorers which hang, raise, crash or return unpicklable values.

Each worker process runs one sample at a time. The parent waits on the workers' pipes with
``multiprocessing.connection.wait``; a worker still busy ``timeout`` seconds after it got its sample is
killed and replaced, and a worker whose pipe closes (segfault, ``os._exit``) is replaced too. Every
sample therefore ends in one of ``ok``, ``error`` (raised), ``unreadable`` (a result that cannot be sent back),
``timeout`` or ``crash`` within a bounded time. Workers ignore SIGINT (the parent decides) and end themselves when
the parent process is gone.

With the ``fork`` start method (default on Linux) the scoring function is inherited, not pickled, so
functions loaded from a file (``custom_reward_function.path``) work unchanged.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import signal
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any


def _exit_when_orphaned(parent_pid: int) -> None:
    """End this worker once its parent is gone (killed trainer): a scorer stuck in user code never reads the pipe's
    EOF, and forked siblings keep each other's pipe ends open."""
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os._exit(0)


def _serve(conn: Connection, compute_score: Callable[..., Any], parent_pid: int, stack_path: str) -> None:
    """Worker loop: receive ``(index, kwargs)``, reply ``(index, status, value)``; ``None`` stops it. On SIGUSR1 the
    Python stacks are written to ``stack_path`` (the parent asks before killing a call that timed out)."""
    # Ctrl-C in a terminal reaches the whole process group: the parent decides what happens to running calls.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    faulthandler.register(signal.SIGUSR1, file=open(stack_path, "w"), all_threads=True)  # noqa: SIM115 - lives on
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        index, kwargs = task
        try:
            reply = (index, "ok", compute_score(**kwargs))
        except BaseException:  # noqa: BLE001 - a scorer's SystemExit must not end the worker silently
            reply = (index, "error", traceback.format_exc(limit=-8).rstrip())
        try:
            conn.send(reply)
        except Exception as exc:  # the value did not pickle
            conn.send((index, "unreadable", f"could not be pickled: {type(exc).__name__}: {exc}"))


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    stack_path: str
    task_index: int | None = None
    started_at: float = 0.0


def _call_stack(worker: _Worker, wait_s: float = 3.0) -> str:
    """Where the worker's scoring call is (faulthandler's dump, most recent call first), or "" if none came."""
    try:
        os.kill(worker.process.pid, signal.SIGUSR1)
    except (OSError, TypeError):
        return ""
    deadline = time.monotonic() + wait_s
    text = ""
    while time.monotonic() < deadline:
        time.sleep(0.05)
        with open(worker.stack_path) as handle:
            text = handle.read()
        if text.endswith("\n\n") or (text and "_serve" in text and text.endswith("\n")):
            break
    for block in text.split("\n\n"):
        frames = [line for line in block.splitlines() if line.startswith("  File ")]
        serving = [i for i, line in enumerate(frames) if line.endswith(" in _serve")]
        if serving:  # the scoring thread: its frames above the pool's own
            return "\n".join(frames[: serving[0]])
    return ""


@dataclass
class ScoringOutcome:
    """How one sample's scoring ended: ``status`` in ok | error | unreadable | timeout | crash, ``value`` the result,
    or the reason (a traceback; for a timeout, where the call was when it was stopped)."""

    status: str
    value: Any


class ScoringPool:
    """``num_processes`` long-lived worker processes scoring samples with a per-sample ``timeout`` (seconds)."""

    def __init__(
        self, compute_score: Callable[..., Any], num_processes: int, timeout: float, start_method: str = "fork"
    ):
        if num_processes < 1 or timeout <= 0:
            raise ValueError(f"need num_processes >= 1 and timeout > 0, got {num_processes}, {timeout}")
        self.compute_score = compute_score
        self.num_processes = num_processes
        self.timeout = timeout
        self.start_method = start_method
        self.context = multiprocessing.get_context(start_method)
        self.workers: list[_Worker] = []

    def _start_worker(self) -> _Worker:
        parent_conn, child_conn = self.context.Pipe(duplex=True)
        handle, stack_path = tempfile.mkstemp(prefix="verl-scorer-", suffix=".stack")
        os.close(handle)
        process = self.context.Process(
            target=_serve, args=(child_conn, self.compute_score, os.getpid(), stack_path), daemon=True
        )
        process.start()
        child_conn.close()  # so the parent's end reports EOF when the worker dies
        return _Worker(process, parent_conn, stack_path)

    @staticmethod
    def _stop_worker(worker: _Worker) -> None:
        worker.conn.close()
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(timeout=5)
        try:
            os.unlink(worker.stack_path)
        except OSError:
            pass

    def score(self, tasks: list[dict[str, Any]]) -> list[ScoringOutcome]:
        """Run ``compute_score(**task)`` for every task; the outcomes come back in the tasks' order.

        Interrupted (Ctrl-C, an error), the pool stops every worker before re-raising: none is left mid-task."""
        try:
            return self._score(tasks)
        except BaseException:
            self.close()
            raise

    def _score(self, tasks: list[dict[str, Any]]) -> list[ScoringOutcome]:
        while len(self.workers) < min(self.num_processes, max(len(tasks), 1)):
            self.workers.append(self._start_worker())
        outcomes: list[ScoringOutcome | None] = [None] * len(tasks)
        pending = deque(range(len(tasks)))
        while pending or any(w.task_index is not None for w in self.workers):
            for worker in self.workers:
                if worker.task_index is None and pending:
                    worker.task_index = pending.popleft()
                    worker.started_at = time.monotonic()
                    worker.conn.send((worker.task_index, tasks[worker.task_index]))
            busy = [w for w in self.workers if w.task_index is not None]
            next_deadline = min(w.started_at for w in busy) + self.timeout
            ready = wait([w.conn for w in busy], timeout=max(0.0, next_deadline - time.monotonic()))
            for position, worker in enumerate(self.workers):
                if worker.task_index is None:
                    continue
                if worker.conn in ready:
                    try:
                        index, status, value = worker.conn.recv()
                    except (EOFError, OSError):
                        worker.process.join(timeout=1)
                        outcomes[worker.task_index] = ScoringOutcome("crash", f"exit code {worker.process.exitcode}")
                        self._replace(position)
                        continue
                    except Exception as exc:  # a result that pickled in the worker but cannot be rebuilt here
                        reason = f"could not be read here: {type(exc).__name__}: {exc}"
                        outcomes[worker.task_index] = ScoringOutcome("unreadable", reason)
                        worker.task_index = None
                        continue
                    outcomes[index] = ScoringOutcome(status, value)
                    worker.task_index = None
                elif time.monotonic() - worker.started_at >= self.timeout:
                    outcomes[worker.task_index] = ScoringOutcome("timeout", _call_stack(worker))
                    self._replace(position)
        return outcomes  # type: ignore[return-value]

    def _replace(self, position: int) -> None:
        self._stop_worker(self.workers[position])
        self.workers[position] = self._start_worker()

    def close(self) -> None:
        """Stop every worker process."""
        for worker in self.workers:
            try:
                worker.conn.send(None)
            except (OSError, ValueError):
                pass
            self._stop_worker(worker)
        self.workers = []

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (e.g. sent to a Ray task) without its processes; the copy starts its own on first use."""
        state = dict(self.__dict__)
        state["workers"] = []
        del state["context"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.context = multiprocessing.get_context(self.start_method)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the processes are daemons and end with it anyway
            pass
