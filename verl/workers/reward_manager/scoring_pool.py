"""A pool of scorer processes that survives scorers which hang, raise, crash or return unpicklable values.

Each worker process runs one sample at a time. The parent waits on the workers' pipes with
``multiprocessing.connection.wait``; a worker still busy ``timeout`` seconds after it got its sample is
killed and replaced, and a worker whose pipe closes (segfault, ``os._exit``) is replaced too. Every
sample therefore ends in one of ``ok``, ``error``, ``timeout`` or ``crash`` within a bounded time.

With the ``fork`` start method (default on Linux) the scoring function is inherited, not pickled, so
functions loaded from a file (``custom_reward_function.path``) work unchanged.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any


def _serve(conn: Connection, compute_score: Callable[..., Any]) -> None:
    """Worker loop: receive ``(index, kwargs)``, reply ``(index, status, value)``; ``None`` stops it."""
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
        except BaseException as exc:  # noqa: BLE001 - a scorer's SystemExit must not end the worker silently
            reply = (index, "error", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(reply)
        except Exception as exc:  # the value did not pickle
            conn.send((index, "error", f"unpicklable result: {type(exc).__name__}: {exc}"))


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    task_index: int | None = None
    started_at: float = 0.0


@dataclass
class ScoringOutcome:
    """How one sample's scoring ended: ``status`` in ok | error | timeout | crash, ``value`` the result or reason."""

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
        process = self.context.Process(target=_serve, args=(child_conn, self.compute_score), daemon=True)
        process.start()
        child_conn.close()  # so the parent's end reports EOF when the worker dies
        return _Worker(process, parent_conn)

    @staticmethod
    def _stop_worker(worker: _Worker) -> None:
        worker.conn.close()
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(timeout=5)

    def score(self, tasks: list[dict[str, Any]]) -> list[ScoringOutcome]:
        """Run ``compute_score(**task)`` for every task; the outcomes come back in the tasks' order."""
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
                        exitcode = worker.process.exitcode
                        outcomes[worker.task_index] = ScoringOutcome("crash", f"worker died (exit code {exitcode})")
                        self._replace(position)
                        continue
                    outcomes[index] = ScoringOutcome(status, value)
                    worker.task_index = None
                elif time.monotonic() - worker.started_at >= self.timeout:
                    outcomes[worker.task_index] = ScoringOutcome("timeout", f"no result after {self.timeout}s")
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
