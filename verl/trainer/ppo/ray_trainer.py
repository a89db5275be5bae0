"""The PPO-family training loop on a single controller (``RayPPOTrainer``).

One step of :meth:`RayPPOTrainer.fit`, top to bottom::

    sample prompts -> [greedy baseline (ReMax)] -> repeat n -> generate -> score -> [dynamic sampling]
    -> old log-probs -> reference log-probs -> values -> KL in reward -> rollout correction -> advantages
    -> [finite check] -> critic update -> actor update (after critic_warmup) -> [finite loss check] -> metrics

Scoring runs the reward-model worker group (``rm_scores``) and then the reward function; with
``reward_model.launch_reward_fn_async`` the reward function runs in another process (a Ray actor) while the
log-probs and values are computed, and its scores are collected just before the advantages
(``reward.compute_reward_async``).

Every algorithmic choice comes from the config through the registries in ``core_algos``; the driver only
moves ``DataProto`` batches between worker groups. Validation, checkpoint files, dynamic sampling, worker
construction and data loading live in their own modules next to this one.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from verl.protocol import DataProto, pad_dataproto_to_divisor, unpad_dataproto
from verl.single_controller.ray import RayWorkerGroup, ResourcePoolManager
from verl.trainer.config.root import PPOConfig
from verl.trainer.ppo import checkpointing, core_algos, finite_checks
from verl.trainer.ppo.dynamic_sampling import GroupFilterBatcher
from verl.trainer.ppo.generation_dump import dump_batch_generations
from verl.trainer.ppo.metric_utils import (
    compute_data_metrics,
    compute_throughout_metrics,
    compute_timing_metrics,
    reduce_metrics,
    reward_trend_summary,
)
from verl.trainer.ppo.reward import compute_reward_async, compute_reward_with_metrics, rows_in_order
from verl.trainer.ppo.rollout_modes import build_rollout_generator
from verl.trainer.ppo.utils import (
    Role,
    need_critic,
    need_reference_policy,
    need_reward_baselines,
    old_log_probs_from_update,
)
from verl.trainer.ppo.validation import run_validation, split_generation_inputs
from verl.trainer.ppo.worker_groups import build_worker_groups
from verl.utils.profiler import marked_timer
from verl.utils.tracking import Tracking

__all__ = ["RayPPOTrainer", "Role", "ResourcePoolManager", "compute_response_mask"]

_trace = logging.getLogger(__name__)  # DEBUG: each step as it starts (VERL_LOGGING_LEVEL=DEBUG)

ASYNC_ROW_KEY = "_reward_row"
"""Non-tensor column recording each row's position when an async reward was launched (rows may be reordered)."""


def compute_response_mask(data: DataProto) -> torch.Tensor:
    """``(bs, R)`` mask of the response tokens: the last R columns of ``attention_mask``."""
    response_length = data.batch["responses"].size(1)
    return data.batch["attention_mask"][:, -response_length:]


class RayPPOTrainer:
    """Drives actor/rollout, reference, critic worker groups through PPO-family training steps."""

    def __init__(
        self,
        config,
        tokenizer,
        role_worker_mapping: dict[Role, type],
        resource_pool_manager: ResourcePoolManager,
        ray_worker_group_cls: type = RayWorkerGroup,
        processor=None,
        reward_fn=None,
        val_reward_fn=None,
        train_dataset=None,
        val_dataset=None,
        collate_fn=None,
        train_sampler=None,
        device_name: str | None = None,
    ):
        if not isinstance(config, PPOConfig):  # a composed DictConfig, as verl recipes pass it
            from verl.trainer.main_ppo import prepare_config

            config = prepare_config(config)
        self.config = config
        self.tokenizer = tokenizer
        self.processor = processor
        self.role_worker_mapping = role_worker_mapping
        self.resource_pool_manager = resource_pool_manager
        self.ray_worker_group_cls = ray_worker_group_cls
        self.reward_fn = reward_fn
        self.val_reward_fn = val_reward_fn
        self.device_name = device_name

        self.use_critic = need_critic(config)
        self.use_reference_policy = need_reference_policy(config)
        self.use_reward_baselines = need_reward_baselines(config)
        self.old_log_probs_from_update = old_log_probs_from_update(config)
        self.async_reward = config.reward_model.launch_reward_fn_async
        self.rm_wg = None
        self._pending_reward = None
        self.ref_in_actor = Role.RefPolicy not in role_worker_mapping
        self.n = int(config.actor_rollout_ref.rollout.n)
        if config.algorithm.use_kl_in_reward:
            self.kl_ctrl_in_reward = core_algos.get_kl_controller(config.algorithm.kl_ctrl)
        actor = config.actor_rollout_ref.actor
        self.entropy_controller = None
        if actor.adaptive_entropy.enabled:
            from verl.trainer.ppo.algos.entropy_control import AdaptiveEntropyController

            self.entropy_controller = AdaptiveEntropyController(actor.adaptive_entropy, actor.entropy_coeff)

        self._create_dataloader(train_dataset, val_dataset, collate_fn, train_sampler)
        steps_in_data = len(self.train_dataloader) * int(config.trainer.total_epochs)
        self.total_training_steps = int(config.trainer.total_training_steps or steps_in_data)
        self._set_optimizer_horizon()
        self.global_steps = 0
        self.train_scores: list[float] = []

    # ------------------------------------------------------------------ setup

    def _create_dataloader(self, train_dataset, val_dataset, collate_fn=None, train_sampler=None) -> None:
        """Resumable loaders (``verl.utils.dataset.create_rl_dataloader``): training batches of
        ``data.gen_batch_size`` (dynamic sampling) or ``data.train_batch_size`` prompts, validation in one batch
        unless ``data.val_batch_size`` is set."""
        from verl.utils.dataset import create_rl_dataloader

        data = self.config.data
        batch_size = self._prompts_per_step()
        if len(train_dataset) < batch_size:
            raise ValueError(
                f"the training set has {len(train_dataset)} prompts, fewer than one batch of {batch_size} "
                "(data.train_batch_size / data.gen_batch_size); lower the batch size or add data"
            )
        collate = {"collate_fn": collate_fn} if collate_fn is not None else {}
        self.train_dataloader = create_rl_dataloader(
            train_dataset, data, batch_size=batch_size, is_train=True, sampler=train_sampler, **collate
        )
        self.val_dataloader = None
        if val_dataset is not None and len(val_dataset) > 0:
            val_batch_size = data.val_batch_size or len(val_dataset)
            self.val_dataloader = create_rl_dataloader(
                val_dataset, data, batch_size=val_batch_size, is_train=False, **collate
            )

    def _prompts_per_step(self) -> int:
        """Prompts drawn per generation round: ``data.gen_batch_size`` (dynamic sampling) or ``train_batch_size``."""
        data = self.config.data
        return int(data.gen_batch_size or data.train_batch_size)

    def _training_batches(self):
        """Batches over ``trainer.total_epochs`` epochs, from the dataloader's saved position on."""
        yield from self.train_dataloader.iter_epochs(self.config.trainer.total_epochs)

    def _set_optimizer_horizon(self) -> None:
        """Tell the actor's and critic's LR schedules how many steps the run has (``optim.total_training_steps``)."""
        for section in (self.config.actor_rollout_ref.actor, self.config.critic):
            section.optim.total_training_steps = self.total_training_steps

    def _worker_group_names(self) -> dict:
        """Extra ``Role -> (group name, config section, role argument)`` entries of a recipe's worker groups."""
        return {}

    def init_workers(self) -> None:
        """Spawn the worker groups and load the models (the actor last); ``self.worker_groups`` holds them all."""
        groups = build_worker_groups(
            self.config,
            self.role_worker_mapping,
            self.resource_pool_manager,
            self.ray_worker_group_cls,
            device_name=self.device_name,
            group_names=self._worker_group_names(),
        )
        self.worker_groups = groups
        self.critic_wg = groups.get("critic")
        self.ref_policy_wg = groups.get("ref")
        self.rm_wg = groups.get("rm")
        self.actor_rollout_wg = groups["actor_rollout"]
        for name, worker_group in groups.items():
            if name != "actor_rollout":
                worker_group.init_model()
        self.actor_rollout_wg.init_model()
        if self.ref_in_actor:
            self.ref_policy_wg = self.actor_rollout_wg
        self.rollout_generator = build_rollout_generator(self.config, self.actor_rollout_wg)

    # ------------------------------------------------------------------ one training step, phase by phase

    def _sample_prompts(self, batches) -> DataProto:
        """The next batch of prompts from the data stream, each with a fresh ``uid``."""
        batch = DataProto.from_single_dict(next(batches))
        batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(batch))], dtype=object)
        return batch

    def _generation_meta(self, do_sample: bool = True) -> dict[str, Any]:
        rollout = self.config.actor_rollout_ref.rollout
        return {
            "eos_token_id": self.tokenizer.eos_token_id,
            "pad_token_id": self.tokenizer.pad_token_id,
            "do_sample": do_sample,
            "temperature": float(rollout.temperature),
            "validate": False,
            "n": 1,
            "global_steps": self.global_steps,
        }

    def _generation_inputs(self, batch: DataProto, world_size: int, do_sample: bool = True) -> tuple[DataProto, int]:
        """The prompt columns of ``batch`` with the sampling meta, padded to a multiple of ``world_size``; and the
        number of padding rows."""
        gen_batch = split_generation_inputs(batch)
        gen_batch.meta_info = self._generation_meta(do_sample)
        return pad_dataproto_to_divisor(gen_batch, world_size)

    def _generate(self, batch: DataProto, do_sample: bool = True) -> DataProto:
        """Roll out one response per row (rows are already repeated n times) and join it to ``batch``."""
        gen_batch, pad_size = self._generation_inputs(batch, self.rollout_generator.world_size, do_sample)
        return self._join_generation(batch, self.rollout_generator.generate_sequences(gen_batch), pad_size)

    def _join_generation(self, batch: DataProto, output: DataProto, pad_size: int) -> DataProto:
        """``batch`` with the rollout's ``output`` (padding rows dropped) joined, ``response_mask`` and the workers'
        generation metrics (``meta_info["generation_metrics"]``)."""
        output = unpad_dataproto(output, pad_size)
        worker_metrics = {f"timing_s/{k}": v for k, v in output.meta_info.pop("timing", {}).items()}
        worker_metrics.update(output.meta_info.pop("metrics", {}))
        batch = batch.union(output)
        if "response_mask" not in batch.batch.keys():
            batch.batch["response_mask"] = compute_response_mask(batch)
        batch.meta_info["generation_metrics"] = worker_metrics
        return batch

    def _greedy_baseline_rewards(self, prompts: DataProto) -> DataProto:
        """ReMax (Li et al., arXiv:2310.10505): the reward of one greedy response per prompt -> ``reward_baselines``."""
        baseline = self._add_model_scores(self._generate(prompts.select(deepcopy=True), do_sample=False))
        scores, _, _ = compute_reward_with_metrics(baseline, self.reward_fn)
        prompts.batch["reward_baselines"] = scores.sum(-1)
        return prompts

    def _add_model_scores(self, batch: DataProto) -> DataProto:
        """``rm_scores (bs, R)`` from the reward-model worker group (``reward_model.enable``), when it runs."""
        if self.rm_wg is None or "rm_scores" in batch.batch.keys():
            return batch
        padded, pad_size = pad_dataproto_to_divisor(batch, self.rm_wg.world_size)
        output = unpad_dataproto(self.rm_wg.compute_rm_score(padded), pad_size)
        batch.meta_info.setdefault("reward_metrics", {}).update(output.meta_info.pop("metrics", {}))
        return batch.union(output)

    def _set_scores(self, batch: DataProto, scores, extra_info: dict, reward_metrics: dict) -> DataProto:
        batch.batch["token_level_scores"] = scores
        for key, values in extra_info.items():
            if len(values) == len(batch):
                batch.non_tensor_batch[key] = np.asarray(values, dtype=object)
        batch.meta_info.setdefault("reward_metrics", {}).update(reward_metrics)
        return batch

    def _score(self, batch: DataProto) -> DataProto:
        """Model scores, then the reward function -> ``token_level_scores`` (bs, R) and its per-sample extra info;
        with ``launch_reward_fn_async`` the reward function is only launched (see :meth:`_collect_scores`)."""
        batch = self._add_model_scores(batch)
        if self.async_reward:
            batch.non_tensor_batch[ASYNC_ROW_KEY] = np.arange(len(batch))
            self._pending_reward = compute_reward_async(batch, self.reward_fn)
            return batch
        return self._set_scores(batch, *compute_reward_with_metrics(batch, self.reward_fn))

    def _collect_scores(self, batch: DataProto) -> DataProto:
        """The async reward function's scores, put back in the batch's current row order (it may be rebalanced)."""
        import ray

        if not self.async_reward:
            return batch
        scores, extra_info, reward_metrics = ray.get(self._pending_reward)
        self._pending_reward = None
        scores, extra_info = rows_in_order(scores, extra_info, batch.non_tensor_batch.pop(ASYNC_ROW_KEY))
        return self._set_scores(batch, scores, extra_info, reward_metrics)

    def _rollout_and_score(self, batches, timing_raw: dict, metrics: dict) -> DataProto:
        """Prompts -> n responses each -> scores; with dynamic sampling, repeated until enough groups differ."""
        batcher = GroupFilterBatcher.from_config(self.config)
        while True:
            prompts = self._sample_prompts(batches)
            if self.use_reward_baselines:
                with marked_timer("gen_max", timing_raw):
                    prompts = self._greedy_baseline_rewards(prompts)
            batch = prompts.repeat(repeat_times=self.n, interleave=True)
            with marked_timer("gen", timing_raw):
                batch = self._generate(batch)
            batch = self._score_generated(batch, timing_raw, metrics)
            if batcher.add(batch):
                metrics.update(batcher.metrics())
                return batcher.result()

    def _score_generated(self, batch: DataProto, timing_raw: dict, metrics: dict) -> DataProto:
        """Record the rollout workers' metrics (their ``timing_s/*`` into ``timing_raw``), score the batch and dump
        it when ``trainer.rollout_data_dir`` is set."""
        for name, value in batch.meta_info.pop("generation_metrics", {}).items():
            if name.startswith("timing_s/"):  # e.g. timing_s/update_weights measured by the worker
                timing_raw[name[len("timing_s/") :]] = timing_raw.get(name[len("timing_s/") :], 0.0) + value
            else:
                metrics[name] = value
        with marked_timer("reward", timing_raw):
            batch = self._score(batch)
        metrics.update(batch.meta_info.pop("reward_metrics", {}))
        if self.config.trainer.rollout_data_dir:
            dump_batch_generations(batch, self.tokenizer, self.global_steps, self.config.trainer.rollout_data_dir)
        return batch

    def _balance_batch(self, batch: DataProto, metrics: dict) -> DataProto:
        """Reorder rows so each data-parallel rank gets about the same number of tokens (``trainer.balance_batch``)."""
        world_size = self.actor_rollout_wg.world_size
        if not self.config.trainer.balance_batch or world_size <= 1:
            return batch
        from verl.utils.seqlen_balancing import get_seqlen_balanced_partitions

        seqlens = batch.batch["attention_mask"].sum(-1).tolist()
        partitions = get_seqlen_balanced_partitions(seqlens, k_partitions=world_size, equal_size=True)
        batch.reorder(torch.tensor([index for partition in partitions for index in partition]))
        rank_tokens = [sum(seqlens[i] for i in partition) for partition in partitions]
        metrics["global_seqlen/min"], metrics["global_seqlen/max"] = float(min(rank_tokens)), float(max(rank_tokens))
        return batch

    def _recompute_old_log_probs(self, batch: DataProto, metrics: dict) -> DataProto:
        """π_old(a|s) of the current actor -> ``old_log_probs``; its mean entropy -> ``actor/entropy``.

        With ``algorithm.rollout_correction.bypass_mode`` the rollout engine's log-probs are used instead. Not
        called on on-policy steps (:func:`old_log_probs_from_update`): the actor update then takes them from its
        own forward pass, which computes exactly these values.
        """
        if self.config.algorithm.rollout_correction.bypass_mode and "rollout_log_probs" in batch.batch.keys():
            batch.batch["old_log_probs"] = batch.batch["rollout_log_probs"]
            return batch
        output = self.actor_rollout_wg.compute_log_prob(batch)
        if "entropys" in output.batch.keys():
            entropys = output.pop(batch_keys=["entropys"]).batch["entropys"]
            loss_agg_mode = self.config.actor_rollout_ref.actor.loss_agg_mode
            entropy = core_algos.agg_loss(entropys, batch.batch["response_mask"], loss_agg_mode)
            metrics["actor/entropy"] = float(entropy)
        metrics.update(output.meta_info.pop("actor_infer_metrics", None) or {})
        return batch.union(output)

    def _compute_ref_log_probs(self, batch: DataProto, metrics: dict) -> DataProto:
        output = self.ref_policy_wg.compute_ref_log_prob(batch)
        metrics.update(output.meta_info.pop("ref_metrics", None) or {})
        return batch.union(output)

    def _compute_values(self, batch: DataProto, metrics: dict) -> DataProto:
        output = self.critic_wg.compute_values(batch)
        metrics.update(output.meta_info.pop("critic_infer_metrics", None) or {})
        return batch.union(output)

    def _apply_kl_in_reward(self, batch: DataProto, metrics: dict) -> DataProto:
        """``token_level_rewards = scores - β·KL(π_old || π_ref)`` with ``use_kl_in_reward``, else the scores."""
        if not self.config.algorithm.use_kl_in_reward:
            batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
            return batch
        batch, kl_metrics = core_algos.apply_kl_penalty(
            batch, kl_ctrl=self.kl_ctrl_in_reward, kl_penalty=self.config.algorithm.kl_penalty
        )
        metrics.update(kl_metrics)
        return batch

    def _apply_rollout_correction(self, batch: DataProto, metrics: dict) -> DataProto:
        """Importance weights / rejection for the rollout-vs-training mismatch (``algorithm.rollout_correction``),
        with its ``rollout_corr/*`` metrics; needs the rollout's log-probs (``rollout.calculate_log_probs``) and
        ``old_log_probs`` (absent on on-policy steps, which skip the diagnostics: the update computes π_old)."""
        if "rollout_log_probs" not in batch.batch.keys() or "old_log_probs" not in batch.batch.keys():
            return batch
        batch, correction_metrics = core_algos.compute_rollout_correction_and_add_to_batch(
            batch, self.config.algorithm.rollout_correction
        )
        metrics.update(correction_metrics)
        return batch

    def _compute_advantages(self, batch: DataProto) -> DataProto:
        """``advantages`` and ``returns`` (bs, R) from the estimator registered as ``algorithm.adv_estimator``."""
        algorithm = self.config.algorithm
        return core_algos.compute_advantage(
            batch,
            adv_estimator=algorithm.adv_estimator,
            gamma=algorithm.gamma,
            lam=algorithm.lam,
            num_repeat=self.n,
            norm_adv_by_std_in_grpo=algorithm.norm_adv_by_std_in_grpo,
            config=algorithm,
        )

    def _update_critic(self, batch: DataProto) -> dict[str, float]:
        return reduce_metrics(self.critic_wg.update_critic(batch).meta_info["metrics"])

    def _apply_entropy_control(self, batch: DataProto, metrics: dict) -> DataProto:
        """Skywork-OR1's adaptive entropy coefficient for this update (``actor.adaptive_entropy``), from the
        policy's entropy on this batch (``actor/entropy``) -> ``meta_info["entropy_coeff"]``."""
        if self.entropy_controller is not None:
            coef = self.entropy_controller.step(metrics["actor/entropy"])
            batch.meta_info["entropy_coeff"] = coef
            metrics["actor/entropy_coeff"] = coef
        return batch

    def _update_actor(self, batch: DataProto) -> dict[str, float]:
        return reduce_metrics(self.actor_rollout_wg.update_actor(batch).meta_info["metrics"])

    def train_step(self, batches) -> dict[str, float]:
        """One PPO step on the next batch of prompts; returns its metrics."""
        metrics: dict[str, float] = {}
        timing_raw: dict[str, float] = {}
        with marked_timer("step", timing_raw):
            batch = self._rollout_and_score(batches, timing_raw, metrics)
            batch = self._learn(batch, timing_raw, metrics)
        return self._step_metrics(batch, timing_raw, metrics)

    def _learn(self, batch: DataProto, timing_raw: dict, metrics: dict) -> DataProto:
        """Everything after scoring: old/reference log-probs, values, advantages, critic and actor updates."""
        batch = self._balance_batch(batch, metrics)
        batch.meta_info["global_token_num"] = batch.batch["attention_mask"].sum(-1).tolist()
        if not self.old_log_probs_from_update:  # else the update's own forward pass gives them
            with marked_timer("old_log_prob", timing_raw):
                batch = self._recompute_old_log_probs(batch, metrics)
        if self.use_reference_policy:
            with marked_timer("ref", timing_raw):
                batch = self._compute_ref_log_probs(batch, metrics)
        if self.use_critic:
            with marked_timer("values", timing_raw):
                batch = self._compute_values(batch, metrics)
        with marked_timer("adv", timing_raw):
            batch = self._rewards_and_advantages(batch, timing_raw, metrics)
            finite_checks.check_update_inputs(batch, self.global_steps)
        if self.use_critic:
            with marked_timer("update_critic", timing_raw):
                metrics.update(self._update_critic(batch))
        if self.global_steps > int(self.config.trainer.critic_warmup):
            with marked_timer("update_actor", timing_raw):
                batch = self._apply_entropy_control(batch, metrics)
                metrics.update(self._update_actor(batch))
        finite_checks.check_update_losses(metrics, self.global_steps)
        return batch

    def _rewards_and_advantages(self, batch: DataProto, timing_raw: dict, metrics: dict) -> DataProto:
        """The final token rewards (async scores collected, KL in reward), rollout correction, then advantages."""
        batch = self._collect_scores(batch)
        metrics.update(batch.meta_info.pop("reward_metrics", {}))
        batch = self._apply_kl_in_reward(batch, metrics)
        batch = self._apply_rollout_correction(batch, metrics)
        return self._compute_advantages(batch)

    def _step_metrics(self, batch: DataProto, timing_raw: dict, metrics: dict) -> dict[str, float]:
        """The step's metrics plus the batch's data, timing and throughput metrics."""
        metrics.update(compute_data_metrics(batch, use_critic=self.use_critic))
        metrics.update(compute_timing_metrics(batch, timing_raw))
        metrics.update(compute_throughout_metrics(batch, timing_raw, n_gpus=self.resource_pool_manager.get_n_gpus()))
        return metrics

    # ------------------------------------------------------------------ validation and checkpoints

    def _validate(self) -> dict[str, float]:
        if self.val_dataloader is None or self.val_reward_fn is None:
            return {}
        return run_validation(
            self.val_dataloader,
            self.rollout_generator,
            self.val_reward_fn,
            self.tokenizer,
            self.config.actor_rollout_ref.rollout,
            num_generations_to_print=self.config.trainer.log_val_generations,
            dump_dir=self.config.trainer.validation_data_dir,
            step=self.global_steps,
            add_model_scores=self._add_model_scores,
        )

    def _save_checkpoint(self) -> None:
        """Models and optimizers (workers), then ``data.pt``, then the manifest of the folder (sizes, sha256), then the
        tracker file (atomically, last)."""
        trainer = self.config.trainer
        step_dir = checkpointing.global_step_dir(trainer.default_local_dir, self.global_steps)
        keep = trainer.max_actor_ckpt_to_keep
        self.actor_rollout_wg.save_checkpoint(
            local_path=f"{step_dir}/actor", global_step=self.global_steps, max_ckpt_to_keep=keep
        )
        if self.use_critic:
            self.critic_wg.save_checkpoint(
                local_path=f"{step_dir}/critic",
                global_step=self.global_steps,
                max_ckpt_to_keep=trainer.max_critic_ckpt_to_keep,
            )
        self._save_extra_models(step_dir)
        state = {
            "global_step": self.global_steps,
            "dataloader": self.train_dataloader.state_dict(),
            "train_scores": list(self.train_scores),
        }
        if self.config.algorithm.use_kl_in_reward:
            state["kl_coef"] = self.kl_ctrl_in_reward.value
        if self.entropy_controller is not None:
            state["entropy_control"] = self.entropy_controller.state_dict()
        checkpointing.save_trainer_state(step_dir, state)
        checkpointing.write_manifest(step_dir, checksums=trainer.checkpoint_checksum)
        checkpointing.write_tracker(trainer.default_local_dir, self.global_steps)
        checkpointing.prune_old_checkpoints(trainer.default_local_dir, keep)
        if trainer.default_hdfs_dir is not None:
            checkpointing.mirror_checkpoint(trainer.default_local_dir, trainer.default_hdfs_dir, self.global_steps)

    def _save_extra_models(self, step_dir: str) -> None:
        """A recipe's own models (e.g. PRIME's reward model), saved before the trainer state and the tracker."""

    def _load_extra_models(self, step_dir: str) -> None:
        """Restore what :meth:`_save_extra_models` wrote."""

    def _load_checkpoint(self) -> int:
        """Restore the checkpoint ``trainer.resume_mode`` selects; returns its global step (0 if none)."""
        path = checkpointing.resolve_resume_path(self.config.trainer)
        if path is None:
            print("Training from scratch (no checkpoint to resume).")
            return 0
        print(f"Resuming from checkpoint {path}")
        delete = self.config.trainer.del_local_ckpt_after_load
        self.actor_rollout_wg.load_checkpoint(f"{path}/actor", del_local_after_load=delete)
        if self.use_critic:
            self.critic_wg.load_checkpoint(f"{path}/critic", del_local_after_load=delete)
        self._load_extra_models(path)
        state = checkpointing.load_trainer_state(path)
        self.global_steps = int(state["global_step"])
        self.train_dataloader.load_state_dict(state["dataloader"])
        self.train_scores = list(state.get("train_scores", []))
        if "kl_coef" in state:
            self.kl_ctrl_in_reward.value = state["kl_coef"]
        if "entropy_control" in state and self.entropy_controller is not None:
            self.entropy_controller.load_state_dict(state["entropy_control"])
        return self.global_steps

    # ------------------------------------------------------------------ the loop

    def fit(self) -> None:
        """Validate (optionally), then train ``total_training_steps`` steps with periodic validation and saving."""
        trainer = self.config.trainer
        logger = Tracking(trainer.project_name, trainer.experiment_name, trainer.logger, config=self.config)
        self._load_checkpoint()
        if self.global_steps == 0 and trainer.val_before_train and self.val_reward_fn is not None:
            logger.log(self._validate(), step=0)
            if trainer.val_only:
                return

        progress = tqdm(total=self.total_training_steps, initial=self.global_steps, desc="Training Progress")
        batches = self._training_batches()
        save_freq, test_freq = int(trainer.save_freq), int(trainer.test_freq)
        while self.global_steps < self.total_training_steps:
            self.global_steps += 1
            _trace.debug("step %d started", self.global_steps)
            try:
                metrics = self.train_step(batches)
            except StopIteration:  # the data ran out before total_training_steps (dynamic sampling drops prompts)
                self.global_steps -= 1
                break
            self.train_scores.append(metrics["critic/score/mean"])
            is_last = self.global_steps >= self.total_training_steps
            if self.val_reward_fn is not None and test_freq > 0 and (is_last or self.global_steps % test_freq == 0):
                metrics.update(self._validate())
            if save_freq > 0 and (is_last or self.global_steps % save_freq == 0):
                self._save_checkpoint()
            metrics["training/global_step"] = self.global_steps
            metrics["training/epoch"] = self.train_dataloader.epoch
            logger.log(metrics, step=self.global_steps)
            progress.update(1)
        progress.close()
        print(reward_trend_summary(self.train_scores), flush=True)
        logger.finish()
