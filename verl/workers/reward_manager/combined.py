"""Rule, model and judge scores combined per sample: ``score = sum_s weight_s * score_s`` over the sources that apply
to the sample's ``data_source`` (``reward_model.combine``).

:class:`CombinedReward` is called like a reward manager (``reward_fn(data, return_dict=True)``). Each source sees
only its rows (the rule scorer never runs on a sample whose data source does not use it). Besides verl's
``reward_tensor`` and ``reward_extra_info`` the result holds ``reward_metrics``: for every source
``reward/<source>/mean|max|min`` of its sequence scores (before weighting) and its counters (judge parse
failures, timeouts, errors). A source's per-row extras (e.g. ``acc``) and ``<source>_score`` are passed on when
it scored every row of the batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from verl.protocol import DataProto
from verl.workers.reward_manager.sources import RewardSource


class CombinedReward:
    """``sources`` by name, their ``weights``, and ``sources_for(data_source) -> names`` selecting them per sample."""

    def __init__(
        self,
        sources: dict[str, RewardSource],
        weights: dict[str, float],
        sources_for: Any,
        reward_fn_key: str = "data_source",
    ):
        unknown = sorted(set(weights) - set(sources))
        if unknown:
            raise ValueError(f"reward_model.combine weights name sources {unknown} that do not run: {sorted(sources)}")
        self.sources = sources
        self.weights = weights
        self.sources_for = sources_for
        self.reward_fn_key = reward_fn_key

    def rows_per_source(self, data: DataProto) -> dict[str, np.ndarray]:
        """Row indices each source scores, from the samples' data sources."""
        if self.reward_fn_key not in data.non_tensor_batch:
            raise KeyError(
                f"The batch has no non-tensor key {self.reward_fn_key!r} (data.reward_fn_key); "
                f"it has {sorted(data.non_tensor_batch)}."
            )
        rows: dict[str, list[int]] = {name: [] for name in self.sources}
        for i, data_source in enumerate(data.non_tensor_batch[self.reward_fn_key]):
            names = self.sources_for(str(data_source))
            missing = [name for name in names if name not in self.sources]
            if missing:
                raise ValueError(
                    f"data source {data_source!r} is scored by {names} (reward_model.combine), but {missing} do not "
                    f"run; running sources: {sorted(self.sources)}"
                )
            for name in names:
                rows[name].append(i)
        return {name: np.asarray(indices, dtype=np.int64) for name, indices in rows.items()}

    def __call__(self, data: DataProto, return_dict: bool = False) -> torch.Tensor | dict[str, Any]:
        total = torch.zeros(data.batch["responses"].shape, dtype=torch.float32)
        extra_info: dict[str, list] = {}
        metrics: dict[str, float] = {}
        for name, rows in self.rows_per_source(data).items():
            if len(rows) == 0:
                continue
            result = self.sources[name].score(data.select_idxs(rows))
            scores = result.token_scores.float()
            total[torch.as_tensor(rows)] += self.weights.get(name, 1.0) * scores
            sequence_scores = scores.sum(-1)
            metrics[f"reward/{name}/mean"] = float(sequence_scores.mean())
            metrics[f"reward/{name}/max"] = float(sequence_scores.max())
            metrics[f"reward/{name}/min"] = float(sequence_scores.min())
            metrics.update(result.metrics)
            if len(rows) == len(data):
                extra_info[f"{name}_score"] = sequence_scores.tolist()
                for key, values in result.extra_info.items():
                    extra_info.setdefault(key, list(values))
        if not return_dict:
            return total
        return {"reward_tensor": total, "reward_extra_info": extra_info, "reward_metrics": metrics}
