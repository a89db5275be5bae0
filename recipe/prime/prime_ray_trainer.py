"""``RayPRIMETrainer``: PPO with PRIME's implicit process rewards (Cui et al., 2025, arXiv:2502.01456).

One step::

    draw train_batch_size * oversample_factor prompts -> n responses each -> verify (outcome acc)
    -> keep train_batch_size prompts, middling accuracy first (data.filter_accuracy)
    -> old log-probs -> [ref] -> PRM: update on acc and/or score (reward_model.model.update)
    -> advantages: leave-one-out of the implicit and the outcome rewards (algorithm.reward_*_coef)
    -> actor update
"""

from __future__ import annotations

import numpy as np
import torch

from recipe.prime.filtering import select_prompt_rows
from recipe.prime.prime_core_algos import PRIME_ADV_ESTIMATOR_REGISTRY, compute_dpo_accuracy
from verl.protocol import DataProto
from verl.trainer.ppo.metric_utils import reduce_metrics
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.utils.profiler import marked_timer

REWARD_MODEL_GROUP = "reward_model"


def outcome_accuracy(batch: DataProto) -> np.ndarray:
    """Per-row outcome in [0, 1]: the scorer's ``acc`` when it reports one, else the sequence's rule score."""
    if "acc" in batch.non_tensor_batch:
        return np.asarray(batch.non_tensor_batch["acc"], dtype=np.float32)
    return batch.batch["token_level_scores"].sum(-1).float().numpy()


class RayPRIMETrainer(RayPPOTrainer):
    """:class:`RayPPOTrainer` plus PRIME's prompt filter, implicit PRM worker group and advantage."""

    def _prompts_per_step(self) -> int:
        data = self.config.data
        return int(data.train_batch_size * data.oversample_factor)

    def _worker_group_names(self) -> dict:
        return {REWARD_MODEL_GROUP: (REWARD_MODEL_GROUP, None, None)}

    def init_workers(self) -> None:
        super().init_workers()
        self.prm_wg = self.worker_groups.get(REWARD_MODEL_GROUP)

    # ------------------------------------------------------------------ rollout, verify, filter

    def _rollout_and_score(self, batches, timing_raw: dict, metrics: dict) -> DataProto:
        """Generate for the oversampled prompts, verify, and keep ``train_batch_size`` prompts (filter first)."""
        prompts = self._sample_prompts(batches)
        batch = prompts.repeat(repeat_times=self.n, interleave=True)
        with marked_timer("gen", timing_raw):
            batch = self._generate(batch)
        batch = self._score_generated(batch, timing_raw, metrics)
        acc = outcome_accuracy(batch)
        metrics["acc"] = float(acc.mean())
        lengths = batch.batch["response_mask"].sum(-1).numpy()
        rows, filter_metrics = select_prompt_rows(
            acc, lengths, batch.non_tensor_batch["uid"], int(self.config.data.train_batch_size), self.config.data
        )
        metrics.update(filter_metrics)
        batch = batch.select_idxs(rows)
        batch.batch["acc"] = torch.as_tensor(acc[rows], dtype=torch.float32)
        return batch

    # ------------------------------------------------------------------ the implicit PRM

    def _implicit_rewards(self, batch: DataProto, metrics: dict) -> DataProto:
        """``rm_scores`` from the PRM, trained on ``acc`` before scoring (``update: before``), in the same pass
        (``after``) or not at all (``none``); ``reward_model/*`` metrics incl. the ranking accuracy ``dpo_acc``."""
        update = self.config.reward_model.model.update
        uids = batch.non_tensor_batch["uid"]
        response_mask = batch.batch["response_mask"]
        if update in ("before", "after"):
            output = self.prm_wg.update_rm(batch)
            metrics.update(reduce_metrics(output.meta_info["metrics"]))
            scores = output.batch["rm_scores"]
            metrics["reward_model/dpo_acc_before"] = float(
                compute_dpo_accuracy(scores, batch.batch["acc"], response_mask, uids)
            )
        if update in ("before", "none"):
            output = self.prm_wg.compute_rm_score(batch)
            metrics.update(reduce_metrics(output.meta_info["metrics"]))
            scores = output.batch["rm_scores"]
        metrics["reward_model/dpo_acc"] = float(compute_dpo_accuracy(scores, batch.batch["acc"], response_mask, uids))
        batch.batch["rm_scores"] = scores
        return batch

    def _compute_advantages(self, batch: DataProto) -> DataProto:
        """PRIME's estimator registered as ``algorithm.adv_estimator`` (``rloo``)."""
        algorithm = self.config.algorithm
        estimator = PRIME_ADV_ESTIMATOR_REGISTRY.get(algorithm.adv_estimator)
        advantages, returns = estimator(
            rm_scores=batch.batch["rm_scores"] if "rm_scores" in batch.batch.keys() else None,
            acc=batch.batch["acc"],
            response_mask=batch.batch["response_mask"],
            index=batch.non_tensor_batch["uid"],
            reward_dpo_coef=float(algorithm.reward_dpo_coef),
            reward_gt_coef=float(algorithm.reward_gt_coef),
        )
        batch.batch["advantages"] = advantages
        batch.batch["returns"] = returns
        return batch

    def _rewards_and_advantages(self, batch: DataProto, timing_raw: dict, metrics: dict) -> DataProto:
        """The implicit PRM's step (update and/or scoring) before the shared reward phases and the advantage."""
        if self.prm_wg is not None:
            with marked_timer("reward_model", timing_raw):
                batch = self._implicit_rewards(batch, metrics)
        return super()._rewards_and_advantages(batch, timing_raw, metrics)

    # ------------------------------------------------------------------ checkpoints

    def _save_extra_models(self, step_dir: str) -> None:
        if self.prm_wg is not None:
            self.prm_wg.save_checkpoint(local_path=f"{step_dir}/reward", global_step=self.global_steps)

    def _load_extra_models(self, step_dir: str) -> None:
        if self.prm_wg is not None:
            self.prm_wg.load_checkpoint(f"{step_dir}/reward")
