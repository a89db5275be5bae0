"""Config of ``python -m verl.trainer.fsdp_sft_trainer`` (``sft_trainer.yaml``), one typed dataclass per group.

verl's SFT key names are kept (``model.partial_pretrain``, ``optim.warmup_steps_ratio``, ``optim.lr_scheduler``,
root ``use_remove_padding``). The model and optimizer groups extend the RL configs
(:class:`~verl.workers.config.HFModelConfig`, :class:`~verl.workers.config.OptimConfig`); the YAML ties the
RL spellings to the SFT ones by interpolation, so each value is written once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.trainer.config.data import CustomClsConfig
from verl.trainer.config.trainer import CheckpointResumeConfig
from verl.workers.config.base import BaseConfig, bounded_field, choice_field
from verl.workers.config.engine import FSDPEngineConfig
from verl.workers.config.model import HFModelConfig
from verl.workers.config.optimizer import OptimConfig

SFT_TRUNCATION_MODES = ("error", "left", "right")
"""How an example longer than ``data.max_length`` is handled: fail, keep its end, or keep its start."""


@dataclass
class MultiturnConfig(BaseConfig):
    """Multi-turn conversations (``MultiTurnSFTDataset``) instead of prompt/response columns."""

    enable: bool = False
    """Read chat ``messages`` lists; the loss covers every assistant turn."""

    messages_key: str = "messages"
    """Column holding the list of ``{role, content}`` messages."""


@dataclass
class SFTDataConfig(BaseConfig):
    """Training and validation examples, their tokenization and the batch sizes."""

    train_batch_size: int = bounded_field(256, gt=0)
    """Examples per optimizer step over all ranks."""

    micro_batch_size: int | None = bounded_field(None, gt=0)
    """Deprecated global micro batch size; when set, ``micro_batch_size_per_gpu`` = it / world size."""

    micro_batch_size_per_gpu: int = bounded_field(4, gt=0)
    """Examples per forward/backward pass on one rank (also the validation batch size per rank)."""

    train_files: Any = "~/data/gsm8k/train.parquet"
    """Training parquet file or list of files."""

    val_files: Any = "~/data/gsm8k/test.parquet"
    """Validation parquet file or list of files; null skips validation."""

    prompt_key: str = "question"
    """Single-turn: column holding the prompt text (or a dict, see ``prompt_dict_keys``)."""

    response_key: str = "answer"
    """Single-turn: column holding the response text (or a dict, see ``response_dict_keys``)."""

    prompt_dict_keys: list[str] | None = None
    """When the prompt column holds dicts: the key to read from each (e.g. ``['question']``)."""

    response_dict_keys: list[str] | None = None
    """When the response column holds dicts: the key to read from each (e.g. ``['answer']``)."""

    multiturn: MultiturnConfig = field(default_factory=MultiturnConfig)
    """Multi-turn chat data."""

    max_length: int = bounded_field(1024, gt=0)
    """Tokens per example after the chat template; shorter ones are right-padded."""

    truncation: str = choice_field("error", SFT_TRUNCATION_MODES)
    """Longer examples: ``error``, ``left`` (keep the end) or ``right`` (keep the start)."""

    balance_dp_token: bool = False
    """Normalise the loss by the token count of the whole global batch (every token weighs the same on every
    rank); false averages each rank's own token-mean loss."""

    chat_template: str | None = None
    """Jinja chat template replacing the tokenizer's; null keeps the tokenizer's."""

    custom_cls: CustomClsConfig = field(default_factory=CustomClsConfig)
    """User dataset class (constructed as ``cls(parquet_files, tokenizer, config)``)."""

    apply_chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments of ``tokenizer.apply_chat_template``."""

    shuffle: bool = True
    """Shuffle the training set each epoch (seeded by ``trainer.seed``)."""


@dataclass
class SFTModelConfig(HFModelConfig):
    """The model being fine-tuned; ``path`` is tied to ``partial_pretrain`` by the YAML."""

    partial_pretrain: str = "default"
    """Hugging Face model folder or hub id to fine-tune; ``default`` is the embedded SmolLM2-135M-Instruct."""

    enable_gradient_checkpointing: bool = False
    """Recompute activations in the backward pass to save memory; off by default in SFT, as in verl's
    ``sft_trainer.yaml`` (the RL model configs default to on)."""

    fsdp_config: FSDPEngineConfig = field(default_factory=FSDPEngineConfig)
    """FSDP2 sharding of the model."""


@dataclass
class SFTOptimConfig(OptimConfig):
    """AdamW with warmup then cosine (or constant) decay; verl's SFT spellings tie to the RL keys in the YAML."""

    lr: float = bounded_field(1e-5, ge=0.0)
    """Peak learning rate."""

    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    """AdamW ``(beta1, beta2)``."""

    warmup_steps_ratio: float = bounded_field(0.1, ge=0.0, le=1.0)
    """Warmup steps as a fraction of the total training steps (verl's SFT name of ``lr_warmup_steps_ratio``)."""

    lr_scheduler: str = choice_field("cosine", ("constant", "cosine"))
    """Schedule after warmup (verl's SFT name of ``lr_scheduler_type``)."""


@dataclass
class SFTTrainerConfig(CheckpointResumeConfig):
    """The run: length, checkpoints, resume (the base's fields), validation and logging."""

    default_local_dir: str = "checkpoints"
    """Checkpoint root; the shipped YAML appends ``project_name/experiment_name``."""

    default_hdfs_dir: str | None = choice_field(None, (None,))
    """HDFS copy of the checkpoints; not available in this build (must stay null)."""

    project_name: str = "gsm8k-sft"
    """Project name for the trackers."""

    experiment_name: str = "test"
    """Experiment (run) name for the trackers."""

    total_epochs: int = bounded_field(4, gt=0)
    """Passes over the training set."""

    total_training_steps: int | None = bounded_field(None, gt=0)
    """Stop after this many optimizer steps; null runs ``total_epochs`` full epochs."""

    logger: list[str] = field(default_factory=lambda: ["console"])
    """Tracking backends, any of ``console``, ``wandb``, ``tensorboard``, ``mlflow``, ``swanlab``, ``file``."""

    seed: int = 1
    """Seed of the data shuffle and of the ranks' random number generators."""

    save_freq: int = -1
    """Save a checkpoint every this many steps (and after the last); -1 saves only after the last step."""

    test_freq: int = -1
    """Compute the validation loss every this many steps (and after the last); -1 only after the last step."""

    max_ckpt_to_keep: int | None = bounded_field(None, gt=0)
    """Most checkpoints kept (oldest deleted first); null keeps all."""

    nnodes: int = bounded_field(1, gt=0)
    """Nodes of the run (informational: torchrun sets the world)."""

    n_gpus_per_node: int = bounded_field(1, gt=0)
    """Processes per node (informational: torchrun's ``--nproc_per_node`` sets the world)."""

    device: str = choice_field("auto", ("auto", "cuda", "cpu"))
    """``auto`` picks ``cuda`` when available, else ``cpu`` (gloo)."""


@dataclass
class SFTConfig(BaseConfig):
    """Root of ``verl/trainer/config/sft_trainer.yaml``."""

    data: SFTDataConfig = field(default_factory=SFTDataConfig)
    """Examples and batch sizes."""

    model: SFTModelConfig = field(default_factory=SFTModelConfig)
    """The model, LoRA, gradient checkpointing and sharding."""

    optim: SFTOptimConfig = field(default_factory=SFTOptimConfig)
    """Optimizer and learning-rate schedule."""

    trainer: SFTTrainerConfig = field(default_factory=SFTTrainerConfig)
    """Run length, checkpoints and logging."""

    use_remove_padding: bool = False
    """Run the model on packed (unpadded) tokens; the YAML ties ``model.use_remove_padding`` to it."""

    ulysses_sequence_parallel_size: int = bounded_field(1, gt=0)
    """Ulysses sequence-parallel degree: each packed micro-batch is split over this many ranks along the sequence
    (the data-parallel size becomes world / this); needs ``use_remove_padding``, and must divide the world size
    and the model's attention heads (and divide its KV heads or be a multiple of them)."""


def validate_typed(cfg: Any, cls: type) -> Any:
    """Check a composed ``DictConfig`` against the dataclass ``cls`` and return the typed object (a ``cls``
    instance passes through). Fails with :class:`~verl.trainer.config.validation.ConfigError` listing every
    unknown key (with the nearest valid key), wrong type, disallowed value and out-of-range number."""
    from verl.trainer.config.validation import check_typed

    if isinstance(cfg, cls):
        return cfg
    return check_typed(cfg, cls)
