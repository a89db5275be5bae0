"""DAPO's dynamic sampling (Yu et al., "DAPO", arXiv:2503.14476, sec. 3.2): keep only prompt groups whose
responses differ in the filter metric, and keep sampling until ``data.train_batch_size`` groups are kept.

A group whose rewards are all equal has zero group-relative advantage and contributes no gradient.
``algorithm.filter_groups``: ``enable``, ``metric`` (``acc``, ``score``, ``seq_reward``, ``seq_final_reward``
or any per-sample key the reward manager returns) and ``max_num_gen_batches`` (0: unlimited).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from verl.protocol import DataProto
from verl.trainer.config.root import PPOConfig

__all__ = ["GroupFilterBatcher", "per_sample_metric", "informative_group_indices"]


def per_sample_metric(batch: DataProto, metric: str) -> np.ndarray:
    """One value per sample of the filter metric.

    ``seq_reward`` / ``score``: summed ``token_level_scores``; ``seq_final_reward``: summed
    ``token_level_rewards`` (the scores when no KL has been applied yet); anything else: the non-tensor
    column of that name (e.g. ``acc`` from the reward manager's extra info).
    """
    if metric in ("seq_reward", "score"):
        return batch.batch["token_level_scores"].sum(-1).double().numpy()
    if metric == "seq_final_reward":
        key = "token_level_rewards" if "token_level_rewards" in batch.batch.keys() else "token_level_scores"
        return batch.batch[key].sum(-1).double().numpy()
    if metric in batch.non_tensor_batch:
        return np.asarray(batch.non_tensor_batch[metric], dtype=np.float64)
    raise KeyError(
        f"algorithm.filter_groups.metric={metric!r} is neither 'seq_reward', 'seq_final_reward', 'score' nor a "
        f"per-sample key of the batch (reward extra info keys present: {sorted(batch.non_tensor_batch)})"
    )


def informative_group_indices(uids: np.ndarray, values: np.ndarray) -> tuple[list[int], int]:
    """Indices of samples whose group (same uid) has a non-zero std of ``values`` (or a single member),
    and the number of such groups."""
    group_values: dict[Any, list[float]] = defaultdict(list)
    for uid, value in zip(uids, values):
        group_values[uid].append(float(value))
    kept = {uid for uid, vals in group_values.items() if len(vals) == 1 or np.std(vals) > 0}
    return [i for i, uid in enumerate(uids) if uid in kept], len(kept)


class GroupFilterBatcher:
    """Accumulates scored generation batches until a training batch is full.

    Disabled, it accepts the first batch as it is. Enabled, each batch is filtered to its informative
    groups and appended; ``add`` returns True once ``target_groups`` groups are held, and the result is
    cut to ``target_groups * n`` samples. More than ``max_num_gen_batches`` generation batches
    (when > 0) fail with a message saying the data is too easy or too hard for the policy.
    """

    def __init__(self, enable: bool, metric: str, max_num_gen_batches: int, target_groups: int, n: int):
        self.enable = enable
        self.metric = metric
        self.max_num_gen_batches = max_num_gen_batches
        self.target_groups = target_groups
        self.n = n
        self.num_gen_batches = 0
        self.num_groups = 0
        self._parts: list[DataProto] = []

    @classmethod
    def from_config(cls, config: PPOConfig) -> GroupFilterBatcher:
        filter_groups = config.algorithm.filter_groups
        return cls(
            enable=filter_groups.enable,
            # validation requires a metric when filtering is enabled; unused otherwise
            metric=filter_groups.metric or "acc",
            max_num_gen_batches=filter_groups.max_num_gen_batches,
            target_groups=config.data.train_batch_size,
            n=config.actor_rollout_ref.rollout.n,
        )

    def add(self, scored: DataProto) -> bool:
        """Take one scored generation batch; True when the training batch is full."""
        self.num_gen_batches += 1
        if not self.enable:
            self._parts = [scored]
            return True
        indices, num_groups = informative_group_indices(
            scored.non_tensor_batch["uid"], per_sample_metric(scored, self.metric)
        )
        if indices:
            self._parts.append(scored.select_idxs(indices))
            self.num_groups += num_groups
        if self.num_groups >= self.target_groups:
            return True
        if 0 < self.max_num_gen_batches <= self.num_gen_batches:
            raise RuntimeError(
                f"Dynamic sampling kept {self.num_groups} of {self.target_groups} prompt groups after "
                f"{self.num_gen_batches} generation batches (algorithm.filter_groups.max_num_gen_batches="
                f"{self.max_num_gen_batches}): nearly all groups have equal rewards, so the data is too easy or "
                f"too hard for the policy. Raise max_num_gen_batches (0 = no limit) or change the data."
            )
        return False

    def result(self) -> DataProto:
        """The training batch (the first ``target_groups * n`` kept samples when filtering)."""
        batch = self._parts[0] if len(self._parts) == 1 else DataProto.concat(self._parts)
        if self.enable:
            batch = batch.slice(0, self.target_groups * self.n)
        return batch

    def metrics(self) -> dict[str, float]:
        return {"train/num_gen_batches": float(self.num_gen_batches)}
