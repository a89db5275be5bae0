"""Waiting for worker outputs with errors that name the failing rank.

``get_results`` waits on all ObjectRefs of one call and raises as soon as one fails:

- the worker raised → :class:`WorkerError` (also an instance of the original exception's class when possible),
  with the rank, the method and the worker's traceback in the message. The other ranks get a few seconds
  (``VERL_WORKER_ERROR_GRACE_S``) to fail too; the traceback shown is the first that is not a lost connection to a
  peer, and the other failures are listed by their last line;
- the worker process died (killed, crashed, OOM) → :class:`WorkerDiedError` naming the rank, instead of a hang;
- nothing came back within ``timeout_s`` → :class:`WorkerTimeoutError` naming the ranks still running.
"""

from __future__ import annotations

import os
import re
import time

import ray
from ray.exceptions import RayActorError, RayTaskError

CALL_TIMEOUT_ENV = "VERL_WORKER_CALL_TIMEOUT_S"
ERROR_GRACE_ENV = "VERL_WORKER_ERROR_GRACE_S"
ERROR_GRACE_S = 5.0
"""After a rank fails, how long the other ranks' results are awaited, so that the error reported is the cause and
not its echo: when one rank dies, its peers fail in their next collective ("Connection closed by peer"), often
first (session 28: rank 1's lost gloo connection was reported, rank 0's engine assertion was not)."""
_LOST_PEER = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|DistNetworkError|TCPStore|"
    r"failed to recv|Socket Timeout"
)
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


class WorkerError(RuntimeError):
    """A worker raised inside a worker-group call."""

    def __init__(self, message: str, rank: int | None = None, method_name: str | None = None) -> None:
        super().__init__(message)
        self.rank = rank
        self.method_name = method_name

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


class WorkerDiedError(WorkerError):
    """A worker process died during a worker-group call."""


class WorkerTimeoutError(WorkerError, TimeoutError):
    """Workers did not return within the call timeout."""


def _worker_error(cause: RayTaskError, message: str, rank: int, method_name: str) -> WorkerError:
    """A ``WorkerError`` that is also an instance of the worker's exception class, so ``except ValueError`` works."""
    original = getattr(cause, "cause", None)
    if isinstance(original, Exception) and not isinstance(original, WorkerError):
        try:
            combined = type(
                f"WorkerError[{type(original).__name__}]",
                (WorkerError, type(original)),
                {"__str__": WorkerError.__str__, "__module__": __name__},
            )
            error = Exception.__new__(combined)
            WorkerError.__init__(error, message, rank, method_name)
            return error
        except TypeError:
            pass
    return WorkerError(message, rank, method_name)


def get_results(
    refs: list,
    ranks: list[int],
    method_name: str,
    group_name: str = "",
    timeout_s: float | None = None,
    worker_names: list[str] | None = None,
) -> list:
    """``ray.get`` of ``refs`` (outputs of ``ranks``) that fails fast and names the failing rank."""
    results: list = [None] * len(refs)
    index_of = {ref: index for index, ref in enumerate(refs)}
    pending = list(refs)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    where = f" of worker group {group_name!r}" if group_name else ""

    def describe(index: int) -> str:
        name = f" ({worker_names[ranks[index]]})" if worker_names and ranks[index] < len(worker_names) else ""
        return f"worker rank {ranks[index]}{name}{where}"

    while pending:
        wait_s = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, pending = ray.wait(pending, num_returns=1, timeout=wait_s)
        if not ready:
            still_running = sorted(ranks[index_of[ref]] for ref in pending)
            raise WorkerTimeoutError(
                f"{method_name!r}: ranks {still_running}{where} did not return within {timeout_s}s "
                f"(call timeout; set {CALL_TIMEOUT_ENV} or RayWorkerGroup(call_timeout_s=...) to change it)",
                rank=still_running[0],
                method_name=method_name,
            )
        for ref in ready:
            index = index_of[ref]
            try:
                results[index] = ray.get(ref)
            except RayActorError as error:
                raise WorkerDiedError(
                    f"{describe(index)} died while running {method_name!r} (process killed or crashed): {error}. "
                    "The worker group cannot be used any more; create a new one.",
                    rank=ranks[index],
                    method_name=method_name,
                ) from error
            except RayTaskError as error:
                failures = [(index, error), *_later_failures(pending, index_of)]
                index, error = next(((i, e) for i, e in failures if not _lost_peer(e)), failures[0])
                message = f"{describe(index)} raised in {method_name!r}; its traceback:\n{_clean(error)}"
                others = [f"{describe(i)}: {_last_line(e)}" for i, e in failures if e is not error]
                if others:
                    message += "\n\nOther ranks failed in the same call too:\n  " + "\n  ".join(others)
                raise _worker_error(error, message, ranks[index], method_name) from error
    return results


def _clean(error: Exception) -> str:
    return _ANSI_ESCAPE.sub("", str(error))


def _last_line(error: Exception) -> str:
    lines = [line for line in _clean(error).splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(error).__name__


def _lost_peer(error: RayTaskError) -> bool:
    """Whether the worker failed because a peer went away (the echo of another rank's failure)."""
    return bool(_LOST_PEER.search(_last_line(error)))


def _later_failures(pending: list, index_of: dict) -> list[tuple[int, RayTaskError]]:
    """``(index, error)`` of the pending calls that raise within the grace period (``VERL_WORKER_ERROR_GRACE_S``)."""
    grace = float(os.environ.get(ERROR_GRACE_ENV, ERROR_GRACE_S))
    if not pending or grace <= 0:
        return []
    ready, _ = ray.wait(pending, num_returns=len(pending), timeout=grace)
    failures = []
    for ref in ready:
        try:
            ray.get(ref)
        except RayTaskError as error:
            failures.append((index_of[ref], error))
        except Exception:  # a died worker: its own error is not a traceback to show
            continue
    return sorted(failures, key=lambda failure: failure[0])
