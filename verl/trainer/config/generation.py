"""Configs of offline generation (``generation.yaml``, ``python -m verl.trainer.main_generation``) and of its
evaluation (``evaluation.yaml``, ``python -m verl.trainer.main_eval``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.trainer.config.trainer import CustomRewardFunctionConfig
from verl.workers.config.base import BaseConfig, bounded_field, choice_field
from verl.workers.config.engine import FSDPEngineConfig
from verl.workers.config.model import HFModelConfig
from verl.workers.config.rollout import RolloutConfig


@dataclass
class GenerationDataConfig(BaseConfig):
    """The prompt file, how many responses per prompt, and where they go."""

    path: str = "~/data/gsm8k/test.parquet"
    """Prompt parquet (verl's RL schema: a chat-message list under ``prompt_key``)."""

    prompt_key: str = "prompt"
    """Column holding the prompt (a chat message list, or a plain string sent as one user message)."""

    n_samples: int = bounded_field(5, gt=0)
    """Responses generated per prompt."""

    output_path: str = "~/data/gsm8k/generated.parquet"
    """Output parquet: the input rows plus a ``responses`` column (a list of ``n_samples`` strings per row)."""

    batch_size: int = bounded_field(128, gt=0)
    """Prompts per generation call."""

    max_samples: int = -1
    """Generate for at most this many prompts (the first ones); -1 uses all."""


@dataclass
class GenerationTrainerConfig(BaseConfig):
    """Resources of the generation run."""

    nnodes: int = bounded_field(1, gt=0)
    """Nodes."""

    n_gpus_per_node: int = bounded_field(1, gt=0)
    """Processes per node; more than one in total needs a ``torchrun`` launch with that many processes."""

    device: str = choice_field("auto", ("auto", "cuda", "cpu"))
    """``auto`` picks ``cuda`` when available, else ``cpu``."""


@dataclass
class GenerationActorConfig(BaseConfig):
    """How the model that feeds the rollout is held (verl's ``actor`` group of ``generation.yaml``)."""

    fsdp_config: FSDPEngineConfig = field(default_factory=FSDPEngineConfig)
    """FSDP2 sharding of the model."""


@dataclass
class GenerationConfig(BaseConfig):
    """Root of ``verl/trainer/config/generation.yaml``."""

    trainer: GenerationTrainerConfig = field(default_factory=GenerationTrainerConfig)
    """Resources."""

    data: GenerationDataConfig = field(default_factory=GenerationDataConfig)
    """Prompts and output."""

    model: HFModelConfig = field(default_factory=HFModelConfig)
    """The model that generates."""

    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Generation backend (a registered rollout name) and sampling; ``rollout.n`` is ``data.n_samples``."""

    actor: GenerationActorConfig = field(default_factory=GenerationActorConfig)
    """Sharding of the model that feeds the rollout."""


@dataclass
class EvaluationDataConfig(BaseConfig):
    """Columns of the generated parquet."""

    path: str = "~/data/gsm8k/generated.parquet"
    """Parquet written by ``main_generation``."""

    prompt_key: str = "prompt"
    """Column holding the prompt."""

    response_key: str = "responses"
    """Column holding the list of responses of each prompt."""

    data_source_key: str = "data_source"
    """Column selecting the scoring function of each row."""

    reward_model_key: str = "reward_model"
    """Column holding ``{"ground_truth": ...}`` of each row."""


@dataclass
class EvaluationConfig(BaseConfig):
    """Root of ``verl/trainer/config/evaluation.yaml``."""

    data: EvaluationDataConfig = field(default_factory=EvaluationDataConfig)
    """The generated parquet."""

    custom_reward_function: CustomRewardFunctionConfig = field(default_factory=CustomRewardFunctionConfig)
    """User scoring function; null ``path`` uses ``default_compute_score``."""

    output_path: str | None = None
    """Where the report json goes; null writes ``<data.path without .parquet>_eval.json``."""

    pass_threshold: float = 0.0
    """A response counts as correct for pass@k when its score is strictly above this value."""
