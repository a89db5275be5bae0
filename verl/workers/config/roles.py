"""Groups of fields shared by several roles, each declared once and inherited.

The actor and the critic both run PPO updates (:class:`PPOUpdateConfig`); the reference and the rollout
both compute log-probs in micro-batches (:class:`LogProbConfig`); the actor and the reference run the same
forward pass (:class:`ForwardConfig`). Declaring a field here once keeps its default and docstring single.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.workers.config.base import BaseConfig, bounded_field, choice_field, registry_field
from verl.workers.config.engine import FSDPEngineConfig
from verl.workers.config.megatron import McoreEngineConfig
from verl.workers.config.optimizer import OptimConfig

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
"""Ways of reducing a (batch, response_len) loss matrix to a scalar (see ``core_algos.agg_loss``)."""


@dataclass
class CheckpointConfig(BaseConfig):
    """What a role writes into and reads from a checkpoint."""

    save_contents: list[str] = field(default_factory=lambda: ["model", "optimizer", "extra"])
    """Parts saved: ``model``, ``optimizer``, ``extra`` (scheduler and RNG state), ``hf_model`` (HF export)."""

    load_contents: list[str] | None = None
    """Parts loaded on resume; null loads what ``save_contents`` saves."""

    async_save: bool = choice_field(False, (False,))
    """Write checkpoints in a background thread; not available in this build (must stay false)."""


@dataclass
class EngineRoleConfig(BaseConfig):
    """Fields of every role that runs a model in the training engine."""

    strategy: str = registry_field("fsdp", "verl.workers.engine.registry:ENGINE_REGISTRY")
    """Registered training engine (``verl.workers.engine.registry``): ``fsdp``/``fsdp2`` run FSDP2 (reads
    ``fsdp_config``), ``megatron`` runs megatron-core (reads ``megatron``)."""

    ulysses_sequence_parallel_size: int = bounded_field(1, gt=0)
    """Ulysses sequence-parallel degree: each packed micro-batch is split over this many ranks along the sequence
    (all-to-all around attention). Must divide the world size and the model's attention heads, and divide its KV
    heads or be a multiple of them; needs ``use_remove_padding``. Token budgets (``*_max_token_len_per_gpu``)
    are per GPU, so a micro-batch holds up to budget * this many tokens."""

    megatron: McoreEngineConfig = field(default_factory=McoreEngineConfig)
    """Tensor/pipeline parallel layout and offload of this role's model when ``strategy`` is ``megatron``."""


@dataclass
class FSDPHolderConfig(BaseConfig):
    """A role whose model is sharded with FSDP2."""

    fsdp_config: FSDPEngineConfig = field(default_factory=FSDPEngineConfig)
    """FSDP2 sharding and offload of this role's model."""


@dataclass
class ForwardConfig(FSDPHolderConfig, EngineRoleConfig):
    """How the policy's forward pass computes log-probs and entropy (actor and reference)."""

    use_torch_compile: bool = False
    """Compile the log-prob/entropy computation with ``torch.compile`` (needs a C++ compiler on CPU)."""

    entropy_from_logits_with_chunking: bool = False
    """Compute the entropy over the vocabulary in chunks to bound peak memory."""

    entropy_checkpointing: bool = False
    """Recompute the entropy in the backward pass instead of keeping its activations."""

    calculate_sum_pi_squared: bool = False
    """With the old log-probs also compute ``sum_pi_squared (bs, R)``, ``sum_v pi(v | s_t)^2`` of the policy at each
    response token (one more forward pass); the ``optimal_token_baseline`` estimator needs it."""


@dataclass
class PPOUpdateConfig(EngineRoleConfig):
    """Fields of a role trained with PPO-style mini-batch updates (actor and critic)."""

    ppo_mini_batch_size: int = bounded_field(256, gt=0)
    """Prompts per optimizer step (multiplied by ``rollout.n`` to count sequences)."""

    ppo_micro_batch_size_per_gpu: int | None = bounded_field(1, gt=0)
    """Sequences per forward/backward pass on one worker (gradient accumulation splits a mini-batch)."""

    ppo_micro_batch_size: int | None = bounded_field(None, gt=0)
    """Deprecated global spelling: when set, ``ppo_micro_batch_size_per_gpu`` becomes it divided by the world size."""

    use_dynamic_bsz: bool = False
    """Form micro-batches by token count (``ppo_max_token_len_per_gpu``) instead of a fixed size."""

    ppo_max_token_len_per_gpu: int = bounded_field(16384, gt=0)
    """Token budget of one micro-batch when ``use_dynamic_bsz`` is true."""

    ppo_epochs: int = bounded_field(1, gt=0)
    """Passes over the rollout batch per training step."""

    shuffle: bool = False
    """Shuffle sequences before splitting the batch into mini-batches."""

    data_loader_seed: int = 1
    """Seed of the mini-batch shuffle (offset by the epoch)."""

    grad_clip: float = bounded_field(1.0, gt=0.0)
    """Maximum global gradient norm."""

    loss_agg_mode: str = choice_field("token-mean", LOSS_AGG_MODES)
    """How the per-token loss is reduced over the batch."""

    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    """Checkpoint contents of this role."""

    optim: OptimConfig = field(default_factory=OptimConfig)
    """Optimizer and learning-rate schedule of this role."""


@dataclass
class LogProbConfig(BaseConfig):
    """Micro-batching of a log-prob computation without gradients (reference and rollout)."""

    log_prob_micro_batch_size_per_gpu: int | None = bounded_field(8, gt=0)
    """Sequences per forward pass on one worker when recomputing log-probs."""

    log_prob_micro_batch_size: int | None = bounded_field(None, gt=0)
    """Deprecated global spelling: when set, ``log_prob_micro_batch_size_per_gpu`` becomes it divided by the world
    size."""

    log_prob_use_dynamic_bsz: bool = False
    """Form log-prob micro-batches by token count (``log_prob_max_token_len_per_gpu``)."""

    log_prob_max_token_len_per_gpu: int = bounded_field(16384, gt=0)
    """Token budget of one log-prob micro-batch when ``log_prob_use_dynamic_bsz`` is true."""
