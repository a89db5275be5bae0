"""Megatron training engine: a Hugging Face model on megatron-core, split by tensor and pipeline parallelism.

Usable alone (tests drive it directly) and held by the Megatron actor, critic, reference and reward-model
roles; it knows nothing about PPO. It builds the pipeline chunks (:mod:`verl.models.mcore`), loads Hugging Face
(or checkpoint) weights into this rank's shards, runs packed micro-batches through the pipeline
(:class:`~verl.workers.engine.megatron.schedule.PipelineSchedule`), reduces gradients and clips them over the
whole layout (:mod:`~verl.workers.engine.megatron.grads`), steps AdamW — sharded over data-parallel ranks
(ZeRO-1, ``ZeroRedundancyOptimizer``) when ``use_distributed_optimizer`` — and gathers full weights for the
rollout. Precision: float32 parameters, gradients and optimizer state; on GPU the forward runs under
``torch.autocast`` in ``megatron.dtype`` (the frozen reference and reward model keep their weights in that
dtype directly).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from typing import Any

import torch
import torch.distributed as dist

from verl.utils.device import current_device, is_cuda_available
from verl.workers.config import HFModelConfig, OptimConfig
from verl.workers.config.megatron import McoreEngineConfig
from verl.workers.engine.fsdp.model_builder import load_hf_config
from verl.workers.engine.fsdp.optim import build_lr_scheduler
from verl.workers.engine.fsdp.sharding import to_dtype
from verl.workers.engine.megatron import grads, optim
from verl.workers.engine.megatron.packed import PackedMicroBatch, pack_micro_batch
from verl.workers.engine.megatron.parallel import ParallelLayout, Ranks, initialize_parallel_state
from verl.workers.engine.megatron.vocab_parallel import vocab_parallel_log_probs_entropy
from verl.workers.engine.megatron.weights import TensorSpec, gather_specs, iter_hf_weights
from verl.workers.engine.registry import register_engine

logger = logging.getLogger(__name__)

ROLES = ("actor", "critic", "ref", "reward")
FROZEN_ROLES = ("ref", "reward")
"""Roles without an optimizer: weights kept in the compute dtype, no gradients."""
VALUE_ROLES = ("critic", "reward")
"""Roles whose model ends in a one-output value head instead of the vocabulary projection."""

# (micro-batch index, packed micro-batch, model output of the last stage) -> (loss to back-propagate or None, result)
StepFn = Callable[[int, PackedMicroBatch, torch.Tensor], tuple[torch.Tensor | None, Any]]


def value_model_config(hf_config):
    """``hf_config`` turned into a one-label ``*ForTokenClassification`` config (the critic's and the reward model's
    model; a ``*ForSequenceClassification`` reward model holds the same backbone and ``score`` head)."""
    architectures = list(getattr(hf_config, "architectures", None) or [])
    base = architectures[0] if architectures else f"{hf_config.model_type.capitalize()}ForCausalLM"
    for suffix in ("ForCausalLM", "ForSequenceClassification"):
        base = base.replace(suffix, "ForTokenClassification")
    hf_config.architectures = [base]
    hf_config.num_labels = 1
    hf_config.classifier_dropout = 0.0
    return hf_config


@register_engine("megatron")
class MegatronEngine:
    """Holds this rank's ``chunks`` (megatron-core ``GPTModel`` per virtual pipeline stage), optimizer and LR
    schedule for one role (``actor``, ``critic``, ``ref`` or the frozen reward model ``reward``)."""

    def __init__(
        self,
        model_config: HFModelConfig,
        engine_config: McoreEngineConfig | None = None,
        optim_config: OptimConfig | None = None,
        role: str = "actor",
    ):
        if role not in ROLES:
            raise ValueError(f"unknown engine role {role!r}; expected one of {list(ROLES)}")
        if not dist.is_initialized():
            raise RuntimeError("MegatronEngine needs torch.distributed initialised")
        self.role = role
        self.model_config = model_config
        if role != "reward" and model_config.lora_rank > 0:
            raise ValueError("LoRA is not supported by the megatron engine; set model.lora_rank=0 or strategy=fsdp")
        self.config = engine_config if engine_config is not None else McoreEngineConfig()
        self.optim_config = optim_config if role not in FROZEN_ROLES else None
        if role not in FROZEN_ROLES and optim_config is None:
            raise ValueError(f"the {role} engine needs an optimizer config (optim)")
        self.layout = ParallelLayout.from_config(self.config, dist.get_world_size())
        self.chunks: list[torch.nn.Module] = []
        self.optimizer = None
        self.lr_scheduler = None
        self._weight_specs: dict[str, TensorSpec] | None = None
        self._params_offloaded = False

    # ------------------------------------------------------------------ set-up
    def initialize(self) -> MegatronEngine:
        """Create the process groups, build and load the model, and the optimizer + schedule (not for the frozen
        ``ref`` and ``reward``)."""
        from megatron.core.transformer.transformer_config import TransformerConfig

        from verl.models.mcore.config_converter import ParallelSizes, hf_to_mcore_config_kwargs
        from verl.models.mcore.model import build_chunks
        from verl.workers.engine.megatron.schedule import PipelineSchedule

        initialize_parallel_state(self.layout)
        self.ranks = Ranks()
        self.hf_config_ = load_hf_config(self.model_config)
        value_head = self._reward_head() if self.role == "reward" else None
        if self.role in VALUE_ROLES:
            value_model_config(self.hf_config_)
        cuda = is_cuda_available()
        self.compute_dtype = to_dtype(self.config.dtype) if cuda else torch.float32
        self.param_dtype = self.compute_dtype if self.role in FROZEN_ROLES else torch.float32
        sizes = ParallelSizes(
            self.layout.tensor, self.layout.pipeline, self.layout.virtual_pipeline, self.layout.sequence_parallel
        )
        kwargs = hf_to_mcore_config_kwargs(
            self.hf_config_, sizes, self.param_dtype, use_cpu_initialization=not cuda, overrides=self._overrides()
        )
        self.transformer_config = TransformerConfig(**kwargs)
        self.chunks = build_chunks(self.hf_config_, self.transformer_config, value_model=self.role in VALUE_ROLES)
        self._load_initial_weights(value_head)
        if self.role in FROZEN_ROLES:
            for chunk in self.chunks:
                chunk.requires_grad_(False)
        self.params = [p for chunk in self.chunks for p in chunk.parameters() if p.requires_grad]
        self.tied_params = self._tied_pipeline_params()
        self.schedule = PipelineSchedule(
            self.chunks, self.ranks, self.hf_config_.hidden_size, self.param_dtype, autocast=self._autocast
        )
        if self.optim_config is not None:
            self.optimizer = optim.build_optimizer(
                self.params, self.optim_config, self.ranks, bool(self.config.use_distributed_optimizer)
            )
            self.lr_scheduler = build_lr_scheduler(self.optimizer, self.optim_config)
        self.offload_optimizer()
        self.offload_params()
        return self

    def _overrides(self) -> dict[str, Any]:
        overrides = dict(self.config.override_transformer_config or {})
        if self.role not in FROZEN_ROLES and self.model_config.enable_gradient_checkpointing:
            if is_cuda_available():
                overrides.setdefault("recompute_granularity", "full")
                overrides.setdefault("recompute_method", "uniform")
                overrides.setdefault("recompute_num_layers", 1)
            else:
                logger.warning(
                    "model.enable_gradient_checkpointing is ignored by the megatron engine on CPU (megatron-core's "
                    "recompute saves CUDA RNG states)"
                )
        return overrides

    def _reward_head(self) -> dict[str, torch.Tensor]:
        """The reward model's value head as full megatron-core tensors (checked and read before the config turns
        into a value model's; see :func:`verl.workers.reward_model.loading.reward_head`)."""
        from verl.workers.reward_model.loading import reward_head

        weight, bias = reward_head(self.model_config.local_path, self.hf_config_)
        return {"output_layer.weight": weight, "output_layer.bias": bias if bias is not None else torch.zeros(1)}

    def _load_initial_weights(self, value_head: dict[str, torch.Tensor] | None = None) -> None:
        if self.config.use_dist_checkpointing:
            from verl.utils.checkpoint.megatron_checkpoint_manager import load_model_state

            if not self.config.dist_checkpointing_path:
                raise ValueError("megatron.use_dist_checkpointing=True needs megatron.dist_checkpointing_path")
            load_model_state(self, self.config.dist_checkpointing_path)
            return
        from verl.models.mcore.loader import load_hf_weights

        path = self.model_config.local_path
        load_hf_weights(
            self.chunks, path, self.hf_config_, self.ranks.tp_rank, self.ranks.tp_size, self.config.seed, value_head
        )

    def _tied_pipeline_params(self) -> list[torch.nn.Parameter]:
        """This rank's copies of a tied embedding when the pipeline separates the embedding from the head."""
        from verl.models.mcore.weight_converter import is_tied

        if self.ranks.pp_size == 1 or not is_tied(self.hf_config_) or self.role in FROZEN_ROLES:
            return []
        found = []
        for chunk in self.chunks:
            if getattr(chunk, "pre_process", False):
                found.append(chunk.embedding.word_embeddings.weight)
            if getattr(chunk, "post_process", False):
                found.append(chunk.output_layer.weight)
        return found

    def _autocast(self):
        if is_cuda_available() and self.compute_dtype != self.param_dtype:
            return torch.autocast("cuda", dtype=self.compute_dtype)
        return nullcontext()

    # ------------------------------------------------------------------ layout
    @property
    def dp_size(self) -> int:
        return self.ranks.dp_size

    @property
    def world_size(self) -> int:
        """Ranks of the whole layout (data x tensor x pipeline x context parallel)."""
        return dist.get_world_size()

    @property
    def dp_rank(self) -> int:
        return self.ranks.dp_rank

    @property
    def dp_group(self):
        return self.ranks.dp_group

    @property
    def is_collect_rank(self) -> bool:
        return self.ranks.is_collect_rank

    def hf_config(self):
        return self.hf_config_

    # ------------------------------------------------------------------ compute
    def run(self, micro_batches: Sequence, step: StepFn, forward_only: bool) -> list[Any]:
        """Pack every TensorDict micro-batch (``input_ids``, ``attention_mask``, ``position_ids``) and run the
        pipeline; ``step(index, packed, output)`` maps the last stage's output for micro-batch ``index`` to
        ``(loss, result)``. Returns the results on the last pipeline stage (in micro-batch order), ``[]`` on
        other stages."""
        device = current_device()
        pad = self.ranks.tp_size if self.transformer_config.sequence_parallel else 1
        packed = [pack_micro_batch(mb, pad, device) for mb in micro_batches]
        for chunk in self.chunks:
            chunk.train(not forward_only)
        return self.schedule.run(packed, lambda output, index: step(index, packed[index], output), forward_only)

    def log_probs(
        self, output: torch.Tensor, micro_batch: PackedMicroBatch, temperature: float, calculate_entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Next-token ``(log_probs, entropy)`` as ``(bs, S)`` tensors aligned like the FSDP engine's: position
        ``t`` holds ``log p(input_ids[t + 1] | input_ids[:t + 1])``; ``output`` is the last stage's
        vocabulary-parallel logits ``(1, T, V / tp)``, computed a chunk of rows at a time (no float32 copy of the
        whole logits; their storage receives the gradient in the backward)."""
        logits = output[0]
        vocab_start = self.ranks.tp_rank * logits.shape[-1]
        log_probs, entropy = vocab_parallel_log_probs_entropy(
            logits, micro_batch.labels, vocab_start, self.ranks.tp_group, calculate_entropy, temperature
        )
        return micro_batch.unpack(log_probs), micro_batch.unpack(entropy) if entropy is not None else None

    def values(self, output: torch.Tensor, micro_batch: PackedMicroBatch) -> torch.Tensor:
        """Scalar values ``(bs, S)`` from the value head's output ``(1, T, 1)``."""
        return micro_batch.unpack(output[0, :, 0].float())

    def broadcast_from_last_stage(self, value: Any) -> Any:
        """The last pipeline stage's ``value`` (a picklable object) on every rank of this pipeline group."""
        if self.ranks.pp_size == 1:
            return value
        box = [value if self.ranks.is_last_stage else None]
        dist.broadcast_object_list(box, src=self.ranks.last_stage_rank, group=self.ranks.pp_group)
        return box[0]

    # ------------------------------------------------------------------ training
    def zero_grad(self) -> None:
        for param in self.params:
            param.grad = None

    def optimizer_step(self) -> float:
        """Reduce gradients over the layout, clip to ``optim.clip_grad``, step (skipped on a non-finite norm) and
        drop the gradients; returns the pre-clip global norm."""
        grads.finalize_grads(self.params, self.ranks, self.tied_params)
        norm = grads.clip_grads(self.params, self.ranks, self.optim_config.clip_grad)
        if math.isfinite(norm):
            self.optimizer.step()
        self.zero_grad()
        return norm

    def lr_scheduler_step(self) -> float:
        """Advance the schedule one training step; returns the lr that was used for this step."""
        lr = self.get_lr()
        self.lr_scheduler.step()
        return lr

    def get_lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def train_mode(self) -> None:
        for chunk in self.chunks:
            chunk.train()

    def eval_mode(self) -> None:
        for chunk in self.chunks:
            chunk.eval()

    # ------------------------------------------------------------------ offload
    def offload_params(self) -> None:
        """Move the parameters to host memory when ``param_offload`` (between compute calls; GPU only)."""
        if self.config.param_offload and is_cuda_available() and not self._params_offloaded:
            optim.move_module_params(self.chunks, torch.device("cpu"))
            self._params_offloaded = True

    def load_params(self) -> None:
        if self._params_offloaded:
            optim.move_module_params(self.chunks, current_device())
            self._params_offloaded = False

    def offload_optimizer(self) -> None:
        if self.config.optimizer_offload and self.optimizer is not None:
            optim.move_optimizer_state(self.optimizer, torch.device("cpu"))

    def load_optimizer(self) -> None:
        if self.config.optimizer_offload and self.optimizer is not None:
            optim.move_optimizer_state(self.optimizer, current_device())

    # ------------------------------------------------------------------ weights
    def weight_specs(self) -> dict[str, TensorSpec]:
        if self._weight_specs is None:
            self._weight_specs = gather_specs(self.chunks, self.ranks, self.hf_config_)
        return self._weight_specs

    def iter_full_state_dict(self, bucket_bytes: int = 256 << 20, dtype=None, device=None) -> Iterator:
        """Full Hugging Face-named tensors on every rank (a collective: every rank must consume the iterator).

        Offloaded parameters come back to the device for the gather (NCCL has no host-memory all-gather) and go
        back to host memory at the end."""
        offloaded = self._params_offloaded
        self.load_params()
        try:
            specs = self.weight_specs()
            yield from iter_hf_weights(self.chunks, self.ranks, self.hf_config_, specs, bucket_bytes, dtype, device)
        finally:
            if offloaded:
                self.offload_params()
