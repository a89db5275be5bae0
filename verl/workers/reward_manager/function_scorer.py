"""Calling the reward function safely: in scoring processes, with a time limit, and with every result checked.

:class:`RewardFunctionScorer` is what every built-in reward manager calls instead of ``compute_score`` itself. Calls run
in a :class:`~verl.workers.reward_manager.scoring_pool.ScoringPool`, so a function that hangs, crashes its process or
calls ``sys.exit`` cannot take the trainer with it. A call fails when it runs past ``reward_model.scoring.timeout``,
raises, kills its process, or returns something that is not a reward (:mod:`~verl.workers.reward_manager.score_values`).
On a failure ``reward_model.scoring.on_error`` decides:

- ``raise``: :class:`RewardFunctionError` naming the function (and its file), the sample, its data source and input,
  and what went wrong (the value returned, the traceback, or the time limit), then the keys that change the policy;
- ``fallback``: the sample scores ``fallback_score``; a warning is printed when more than ``warn_ratio`` of a batch
  failed.

Either way the counters ``reward/timeouts`` and ``reward/errors`` (failed samples) are part of every result.
"""

from __future__ import annotations

import functools
import inspect
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from verl.workers.config.reward_scoring import RewardScoringConfig
from verl.workers.reward_manager.abstract import ScoringInput
from verl.workers.reward_manager.score_values import InvalidScore, parse_score
from verl.workers.reward_manager.scoring_pool import ScoringOutcome, ScoringPool

TIMEOUTS_METRIC = "reward/timeouts"
"""Samples of the step whose reward-function call ran past ``reward_model.scoring.timeout``."""

ERRORS_METRIC = "reward/errors"
"""Samples of the step whose call raised, killed its process, or returned a non-reward (non-numeric, NaN, inf)."""

FAILURE_STATUSES = ("timeout", "error", "invalid")
"""How a call can fail; ``ok`` otherwise."""


class RewardFunctionError(RuntimeError):
    """A reward-function call failed under ``reward_model.scoring.on_error=raise``."""


def describe_function(fn: Callable) -> str:
    """``name (file:line)`` of a reward function, through ``functools.partial`` and ``functools.wraps`` layers."""
    inner = fn
    while isinstance(inner, functools.partial):
        inner = inner.func
    inner = inspect.unwrap(inner)
    while isinstance(inner, functools.partial):
        inner = inner.func
    name = getattr(inner, "__qualname__", None) or type(inner).__name__
    try:
        return f"{name} ({inspect.getsourcefile(inner)}:{inspect.getsourcelines(inner)[1]})"
    except (OSError, TypeError):
        return name


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}... ({len(text)} characters)"


@dataclass
class ScoringResult:
    """Per-sample ``scores``, ``extras`` (a dict result's keys; empty for failed samples) and ``statuses``
    (``ok`` or one of :data:`FAILURE_STATUSES`)."""

    scores: list[float]
    extras: list[dict[str, Any]]
    statuses: list[str]
    fallback_score: float = 0.0

    @property
    def metrics(self) -> dict[str, float]:
        """``reward/timeouts`` and ``reward/errors``: counts of failed samples (0 when nothing failed)."""
        counts = Counter(self.statuses)
        return {TIMEOUTS_METRIC: float(counts["timeout"]), ERRORS_METRIC: float(counts["error"] + counts["invalid"])}

    def extra_info(self) -> dict[str, list[Any]]:
        """Per-key lists over the batch. A failed sample has no values of its own: its ``score`` is the fallback
        score and its other keys 0.0, so per-sample metrics (e.g. ``acc``) stay numeric."""
        keys = sorted({key for extra in self.extras for key in extra})
        info: dict[str, list[Any]] = {key: [] for key in keys}
        for extra, status in zip(self.extras, self.statuses):
            for key in keys:
                if status != "ok":
                    info[key].append(self.fallback_score if key == "score" else 0.0)
                else:
                    info[key].append(extra.get(key))
        return info


@dataclass
class _Failure:
    index: int
    status: str
    reason: str


class RewardFunctionScorer:
    """Runs ``compute_score`` for samples (one call each, or one call for a batch) under ``config``'s policy."""

    def __init__(
        self,
        compute_score: Callable[..., Any],
        config: RewardScoringConfig | dict | None = None,
        reward_fn_key: str = "data_source",
    ):
        from verl.utils.config import as_typed_config

        self.compute_score = compute_score
        self.config = as_typed_config(config or {}, RewardScoringConfig, "reward_model.scoring")
        self.reward_fn_key = reward_fn_key
        self.pool: ScoringPool | None = None

    def _pool(self) -> ScoringPool:
        if self.pool is None:
            import os

            processes = self.config.num_processes or min(8, os.cpu_count() or 1)
            self.pool = ScoringPool(self.compute_score, processes, float(self.config.timeout))
        return self.pool

    def score_each(self, samples: list[ScoringInput]) -> ScoringResult:
        """One call per sample: ``compute_score(data_source=, solution_str=, ground_truth=, extra_info=)``."""
        tasks = [
            {
                "data_source": s.data_source,
                "solution_str": s.solution_str,
                "ground_truth": s.ground_truth,
                "extra_info": s.extra_info,
            }
            for s in samples
        ]
        outcomes = self._pool().score(tasks) if tasks else []
        scores, extras, failures = [], [], []
        for index, outcome in enumerate(outcomes):
            score, extra, failure = self._judge(index, outcome)
            scores.append(score)
            extras.append(extra)
            if failure is not None:
                failures.append(failure)
        return self._finish(samples, scores, extras, failures, per_call=False)

    def score_batch(self, samples: list[ScoringInput], **reward_kwargs: Any) -> ScoringResult:
        """One call for the batch: ``compute_score(data_sources=, solution_strs=, ground_truths=, extra_infos=,
        **reward_kwargs)`` returning one result per sample, in order."""
        task = {
            "data_sources": [s.data_source for s in samples],
            "solution_strs": [s.solution_str for s in samples],
            "ground_truths": [s.ground_truth for s in samples],
            "extra_infos": [s.extra_info for s in samples],
            **reward_kwargs,
        }
        (outcome,) = self._pool().score([task])
        if outcome.status == "ok":
            values = outcome.value
            try:
                values = list(values)
            except TypeError:
                outcome = ScoringOutcome(
                    "invalid", f"it returned {_short(values)} instead of a list of {len(samples)} results"
                )
            else:
                if len(values) != len(samples):
                    outcome = ScoringOutcome(
                        "invalid", f"it returned {len(values)} results for a batch of {len(samples)} samples"
                    )
        if outcome.status != "ok":  # the whole call failed: every sample shares its failure
            status = "invalid" if outcome.status == "invalid" else self._status(outcome.status)
            failures = [_Failure(i, status, self._reason(outcome)) for i in range(len(samples))]
            fallback = float(self.config.fallback_score)
            return self._finish(samples, [fallback] * len(samples), [{}] * len(samples), failures, per_call=True)
        scores, extras, failures = [], [], []
        for index, value in enumerate(values):
            score, extra, failure = self._judge(index, ScoringOutcome("ok", value))
            scores.append(score)
            extras.append(extra)
            if failure is not None:
                failures.append(failure)
        return self._finish(samples, scores, extras, failures, per_call=False)

    # ------------------------------------------------------------------ outcomes

    @staticmethod
    def _status(pool_status: str) -> str:
        return "timeout" if pool_status == "timeout" else "error"

    def _reason(self, outcome: ScoringOutcome) -> str:
        if outcome.status == "timeout":
            where = f"; it was stopped at (most recent call first):\n{outcome.value}" if outcome.value else ""
            return (
                f"it gave no result within reward_model.scoring.timeout={self.config.timeout} s (its process was "
                f"killed){where}"
            )
        if outcome.status == "crash":
            return f"its process died ({outcome.value})"
        if outcome.status == "error":
            return f"it raised:\n{outcome.value}"
        if outcome.status == "unreadable":
            return f"its result {outcome.value}"
        return str(outcome.value)

    def _judge(self, index: int, outcome: ScoringOutcome) -> tuple[float, dict[str, Any], _Failure | None]:
        """``(score, extras, failure or None)`` of one call's outcome."""
        fallback = float(self.config.fallback_score)
        if outcome.status != "ok":
            return fallback, {}, _Failure(index, self._status(outcome.status), self._reason(outcome))
        try:
            score, extra = parse_score(outcome.value)
        except InvalidScore as exc:
            return fallback, {}, _Failure(index, "invalid", f"it {exc}")
        return score, extra, None

    def _finish(
        self,
        samples: list[ScoringInput],
        scores: list[float],
        extras: list[dict[str, Any]],
        failures: list[_Failure],
        per_call: bool,
    ) -> ScoringResult:
        statuses = ["ok"] * len(samples)
        for failure in failures:
            statuses[failure.index] = failure.status
        result = ScoringResult(scores, extras, statuses, float(self.config.fallback_score))
        if not failures:
            return result
        if self.config.on_error == "raise":
            raise RewardFunctionError(self._message(samples, failures, per_call))
        share = len(failures) / len(samples)
        if share > self.config.warn_ratio:
            first = failures[0]
            print(
                f"WARNING: the reward function {describe_function(self.compute_score)} failed on {len(failures)} of "
                f"{len(samples)} samples (timeouts {int(result.metrics[TIMEOUTS_METRIC])}, errors "
                f"{int(result.metrics[ERRORS_METRIC])}); they score reward_model.scoring.fallback_score="
                f"{self.config.fallback_score}. First failure, sample {first.index} (data_source "
                f"{samples[first.index].data_source!r}): {first.reason.splitlines()[0]}",
                flush=True,
            )
        return result

    def _message(self, samples: list[ScoringInput], failures: list[_Failure], per_call: bool) -> str:
        first = failures[0]
        sample = samples[first.index]
        if per_call:
            sources = Counter(str(s.data_source) for s in samples)
            where = f"on its call for a batch of {len(samples)} samples (data sources: " + ", ".join(
                f"{name} x{count}" for name, count in sources.items()
            )
        else:
            where = f"on sample {first.index} of {len(samples)} (data_source {sample.data_source!r}"
        counts = Counter(f.status for f in failures)
        others = ""
        if len(failures) > 1 and not per_call:
            others = (
                f"\n{len(failures)} of {len(samples)} samples failed (timeouts {counts['timeout']}, errors "
                f"{counts['error']}, non-reward results {counts['invalid']})."
            )
        return (
            f"the reward function {describe_function(self.compute_score)} failed {where}): {first.reason}\n"
            f"  input of sample {first.index}: solution_str={_short(sample.solution_str)}, "
            f"ground_truth={_short(sample.ground_truth)}, extra_info={_short(sample.extra_info)}{others}\n"
            "Fix the function, or set reward_model.scoring.on_error=fallback to score failed samples with "
            f"reward_model.scoring.fallback_score (now {self.config.fallback_score}) and count them in "
            "reward/timeouts and reward/errors. Checkpoints already saved are intact."
        )

    def close(self) -> None:
        """Stop the scoring processes (they restart on the next call)."""
        if self.pool is not None:
            self.pool.close()
