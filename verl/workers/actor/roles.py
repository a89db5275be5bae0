"""The policy-side roles a worker composes: the trained actor and the frozen reference policy.

Each role owns its engine and is usable alone; ``ActorRolloutRefWorker`` only holds them together.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from verl.protocol import DataProto
from verl.utils.checkpoint import FSDPCheckpointManager
from verl.workers.actor.dp_actor import DataParallelPPOActor
from verl.workers.actor.loss import step_overrides
from verl.workers.actor.role_utils import (
    CheckpointedRole,
    forward_with_metrics,
    make_flops_counter,
    per_rank_mini_batch_size,
    update_with_metrics,
    with_fields,
)
from verl.workers.engine.registry import get_engine_cls


def log_prob_meta(config, temperature: float) -> dict:
    """``meta_info`` for ``compute_log_prob`` from a config with verl's ``log_prob_*`` keys."""
    return {
        "micro_batch_size": config.log_prob_micro_batch_size_per_gpu,
        "use_dynamic_bsz": bool(config.log_prob_use_dynamic_bsz),
        "max_token_len": config.log_prob_max_token_len_per_gpu,
        "temperature": temperature,
    }


class ActorRoleBase(CheckpointedRole):
    """What the trained policy's role does on any engine. A subclass's ``__init__`` sets ``engine``, ``config`` (the
    actor config with the per-rank mini-batch), ``actor`` (its ``compute_log_prob`` / ``update_policy``),
    ``checkpoint_manager``, ``flops_counter`` and ``last_metrics = {}``."""

    def compute_log_prob(self, data: DataProto, meta: dict, calculate_entropy: bool = True):
        """``(log_probs, entropys)``; ``self.last_metrics`` gets ``perf/mfu/actor_infer``."""
        data.meta_info.update(meta)
        out, self.last_metrics = forward_with_metrics(
            "perf/mfu/actor_infer",
            self.engine,
            self.flops_counter,
            data,
            lambda: self.actor.compute_log_prob(data, calculate_entropy=calculate_entropy),
            self.actor.output_layer_tokens(data),
        )
        return out

    def update(self, data: DataProto) -> dict:
        """One ``update_policy`` call plus ``actor/lr``, ``perf/mfu/actor``, ``perf/max_memory_allocated_gb``;
        advances the LR schedule by one step. MFU counts the whole batch's FLOPs over every rank of the group."""

        def update_policy() -> dict:
            with step_overrides(self.actor, data.meta_info):
                return self.actor.update_policy(data)

        epochs = int(self.config.ppo_epochs)
        head_tokens = self.actor.output_layer_tokens(data)
        return update_with_metrics("actor", self.engine, self.flops_counter, data, epochs, update_policy, head_tokens)


class ReferenceRoleBase:
    """What the frozen reference policy's role does on any engine. A subclass's ``__init__`` sets ``engine``,
    ``config``, ``actor`` (its ``compute_log_prob``), ``flops_counter`` and ``last_metrics = {}``."""

    def forward_context(self):
        """The context the reference forward runs in (none by default)."""
        return nullcontext()

    def compute_ref_log_prob(self, data: DataProto, meta: dict) -> torch.Tensor:
        """Reference log-probs ``(bs, R)``; ``self.last_metrics`` gets ``perf/mfu/ref``."""
        data.meta_info.update(meta)

        def forward() -> torch.Tensor:
            with self.forward_context():
                log_probs, _ = self.actor.compute_log_prob(data, calculate_entropy=False)
            return log_probs

        log_probs, self.last_metrics = forward_with_metrics(
            "perf/mfu/ref", self.engine, self.flops_counter, data, forward, self.actor.output_layer_tokens(data)
        )
        return log_probs


class ActorRole(ActorRoleBase):
    """The trained policy: FSDP engine + ``DataParallelPPOActor`` + checkpoints + MFU accounting."""

    def __init__(self, model_config, actor_config, tokenizer, rollout_n: int = 1):
        self.engine = get_engine_cls(actor_config.strategy)(
            model_config,
            actor_config.fsdp_config,
            actor_config.optim,
            role="actor",
            use_torch_compile=actor_config.use_torch_compile,
            freeze_vision_tower=actor_config.freeze_vision_tower,
            ulysses_sequence_parallel_size=actor_config.ulysses_sequence_parallel_size,
        ).initialize()
        mini = per_rank_mini_batch_size(actor_config, rollout_n, self.engine.dp_size, "actor_rollout_ref.actor")
        self.config = with_fields(actor_config, ppo_mini_batch_size=mini)
        self.actor = DataParallelPPOActor(
            self.config,
            self.engine.forward_module,
            self.engine.optimizer,
            use_remove_padding=bool(model_config.use_remove_padding),
            ulysses=self.engine.ulysses,
            use_fused_kernels=bool(model_config.use_fused_kernels),
            use_torch_compile=self.engine.use_torch_compile,
        )
        self.checkpoint_manager = FSDPCheckpointManager(
            self.engine.module, self.engine.optimizer, self.engine.lr_scheduler, tokenizer, actor_config.checkpoint
        )
        self.flops_counter = make_flops_counter(self.engine.hf_config())
        self.last_metrics: dict = {}
        self.engine.offload_optimizer()

    @property
    def module(self):
        return self.engine.module


class ReferenceRole(ReferenceRoleBase):
    """The frozen reference policy: its own FSDP engine (no optimizer) and log-prob computation."""

    def __init__(self, model_config, ref_config):
        self.engine = get_engine_cls(ref_config.strategy)(
            with_fields(model_config, lora_rank=0),
            ref_config.fsdp_config,
            None,
            role="ref",
            use_torch_compile=ref_config.use_torch_compile,
            ulysses_sequence_parallel_size=ref_config.ulysses_sequence_parallel_size,
        ).initialize()
        self.config = ref_config
        self.actor = DataParallelPPOActor(
            ref_config,
            self.engine.forward_module,
            None,
            use_remove_padding=bool(model_config.use_remove_padding),
            ulysses=self.engine.ulysses,
            use_fused_kernels=bool(model_config.use_fused_kernels),
            use_torch_compile=self.engine.use_torch_compile,
        )
        self.flops_counter = make_flops_counter(self.engine.hf_config())
        self.last_metrics: dict = {}


class LoraReferenceRole(ReferenceRoleBase):
    """With LoRA the reference is the actor's base model: the actor module with its adapters disabled
    (no second copy of the weights)."""

    def __init__(self, actor_role: ActorRole, ref_config):
        self.actor_role = actor_role
        self.config = ref_config
        self.engine = actor_role.engine
        self.actor = actor_role.actor
        self.flops_counter = actor_role.flops_counter
        self.last_metrics: dict = {}

    def forward_context(self):
        disable = getattr(self.engine.module, "disable_adapter", None)
        return disable() if disable is not None else nullcontext()
