"""A per-call timeout and error policy around any reward source.

:class:`GuardedSource` runs ``source.score(rows)`` in a helper thread and waits at most ``timeout`` seconds.
When the call times out it asks the source to stop (``source.cancel()`` when it has one: a judge restarts its
engine) and, like a call that raised, applies ``on_error``:

- ``raise``: :class:`RewardSourceError` naming the source, the rows' data sources, the cause and the keys to
  change; the run stops before the step's update, so every checkpoint already written stays intact;
- ``fallback``: every row of the call scores ``fallback_score`` and the call counts in
  ``reward/<source>/timeouts`` or ``reward/<source>/errors`` (rows).

The counters are always reported (0 when nothing failed), so a dashboard shows a silent fallback.
"""

from __future__ import annotations

import threading
import traceback
from collections import Counter
from dataclasses import dataclass
from typing import Any

from verl.protocol import DataProto
from verl.workers.reward_manager.sources import RewardSource, SourceScores, at_last_token


class RewardSourceError(RuntimeError):
    """A reward source timed out or raised under ``on_error: raise``."""


@dataclass
class CallPolicy:
    """``timeout`` seconds per call (None: unbounded), ``on_error`` raise | fallback, ``fallback_score``;
    ``keys`` names the config keys that set them (for the error message)."""

    timeout: float | None = None
    on_error: str = "raise"
    fallback_score: float = 0.0
    keys: str = ""

    def __post_init__(self) -> None:
        if self.on_error not in ("raise", "fallback"):
            raise ValueError(f"on_error must be 'raise' or 'fallback', got {self.on_error!r}")


def _data_sources(data: DataProto, reward_fn_key: str) -> str:
    values = data.non_tensor_batch.get(reward_fn_key)
    if values is None:
        return "?"
    return ", ".join(f"{name} x{count}" for name, count in Counter(map(str, values)).items())


class GuardedSource:
    """``source`` with ``policy`` applied to every call (see the module doc)."""

    def __init__(self, source: RewardSource, policy: CallPolicy, reward_fn_key: str = "data_source"):
        self.source = source
        self.name = source.name
        self.policy = policy
        self.reward_fn_key = reward_fn_key

    def _call(self, data: DataProto) -> tuple[str, Any]:
        """``("ok", SourceScores)``, ``("error", traceback text)`` or ``("timeout", None)``."""
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["ok"] = self.source.score(data)
            except BaseException:  # noqa: BLE001 - reported to the caller, whatever it was
                outcome["error"] = traceback.format_exc()

        thread = threading.Thread(target=run, name=f"reward-{self.name}", daemon=True)
        thread.start()
        thread.join(self.policy.timeout)
        if thread.is_alive():
            cancel = getattr(self.source, "cancel", None)
            if cancel is not None:
                cancel()
            return "timeout", None
        if "error" in outcome:
            return "error", outcome["error"]
        return "ok", outcome["ok"]

    def score(self, data: DataProto) -> SourceScores:
        status, value = self._call(data)
        counters = {f"reward/{self.name}/timeouts": 0.0, f"reward/{self.name}/errors": 0.0}
        if status == "ok":
            value.metrics.update(counters)
            return value
        cause = f"no result after {self.policy.timeout}s" if status == "timeout" else f"it raised:\n{value}"
        if self.policy.on_error == "raise":
            raise RewardSourceError(
                f"reward source {self.name!r} failed on {len(data)} rows (data sources: "
                f"{_data_sources(data, self.reward_fn_key)}): {cause}\nChange {self.policy.keys or 'its settings'} "
                "(e.g. on_error=fallback to score such calls with the default score instead of stopping)."
            )
        counters[f"reward/{self.name}/{'timeouts' if status == 'timeout' else 'errors'}"] = float(len(data))
        print(f"WARNING: reward source {self.name!r}: {cause.splitlines()[0]}; {len(data)} rows score "
              f"{self.policy.fallback_score} (on_error=fallback)", flush=True)  # fmt: skip
        scores = at_last_token(data, [float(self.policy.fallback_score)] * len(data))
        return SourceScores(scores, {}, counters)
