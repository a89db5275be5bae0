"""Trainer config (``trainer``, ``custom_reward_function``, ``ray_kwargs``): the run, its resources and logging."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.workers.config.base import BaseConfig, bounded_field, choice_field, registry_field


@dataclass
class CustomRewardFunctionConfig(BaseConfig):
    """A user reward function ``fn(data_source, solution_str, ground_truth, extra_info=None, **reward_kwargs)``."""

    path: str | None = None
    """Python file defining the function; null uses ``verl.utils.reward_score.default_compute_score``."""

    name: str = "compute_score"
    """Function name inside ``path``."""

    reward_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments bound to the function."""


@dataclass
class PlacementConfig(BaseConfig):
    """Which resource pool each worker group runs on (split placement).

    By default every role shares ``global_pool`` (``trainer.nnodes`` x ``trainer.n_gpus_per_node`` processes):
    roles on one pool are colocated, one process per device holding them all. Naming a role here moves it to its
    own pool, e.g. ``pools: {critic_pool: [2]}`` with ``roles: {critic: critic_pool}`` trains the critic on two
    more devices, beside the actor instead of time-sharing its devices.
    """

    pools: dict[str, list[int]] | None = None
    """Extra resource pools: name -> processes (devices) per node, e.g. ``{critic_pool: [2]}``; null: none."""

    roles: dict[str, str] | None = None
    """Worker group -> pool name, e.g. ``{critic: critic_pool}``; groups not named here (``actor_rollout``, ``ref``,
    ``critic`` and those a recipe adds, such as ``teacher``) run on ``global_pool``; null: all of them."""


@dataclass
class CheckpointResumeConfig(BaseConfig):
    """Where a run resumes from and how its checkpoints are verified: shared by the PPO and SFT trainers."""

    resume_mode: str = choice_field("auto", ("auto", "disable", "resume_path"))
    """``auto``: latest checkpoint in ``default_local_dir``; ``resume_path``: ``resume_from_path``; ``disable``."""

    resume_from_path: str | None = None
    """Checkpoint folder (``global_step_N``) to resume from when ``resume_mode`` is ``resume_path``."""

    checkpoint_checksum: bool = True
    """Record each checkpoint file's sha256 in the step folder's manifest (``checkpoint_manifest.json``, written after
    every other file) and compare it on resume; false records and compares sizes only (no second read of large
    checkpoints)."""

    on_corrupt_checkpoint: str = choice_field("fallback", ("fallback", "stop"))
    """When the checkpoint ``resume_mode=auto`` picks does not match its manifest (a file missing, truncated or
    changed): ``fallback`` resumes from the newest older ``global_step_*`` that does, with a loud warning; ``stop``
    fails naming the bad file and the command that resumes from the newest intact checkpoint. Nothing is deleted."""


@dataclass
class TrainerConfig(CheckpointResumeConfig):
    """The training run: resources, length, validation, checkpoints and logging."""

    project_name: str = "verl_examples"
    """Project name for the trackers and the default checkpoint folder."""

    experiment_name: str = "arithmetic"
    """Experiment (run) name for the trackers and the default checkpoint folder."""

    logger: list[str] = registry_field(lambda: ["console"], "verl.utils.tracking:LOGGER_REGISTRY")
    """Registered tracking backends (``verl.utils.tracking``), e.g. ``console``, ``wandb``, ``tensorboard``,
    ``mlflow``, ``swanlab``, ``file``."""

    log_val_generations: int = bounded_field(0, ge=0)
    """Validation samples (prompt, response, score) logged per validation."""

    rollout_data_dir: str | None = None
    """Folder where each step's rollouts are dumped as jsonl; null disables the dump."""

    validation_data_dir: str | None = None
    """Folder where validation generations are dumped as jsonl; null disables the dump."""

    nnodes: int = bounded_field(1, gt=0)
    """Nodes of the Ray cluster."""

    n_gpus_per_node: int = bounded_field(1, gt=0)
    """Workers per node: GPUs on an accelerator machine, worker processes on CPU."""

    device: str = choice_field("auto", ("auto", "cuda", "cpu"))
    """Device of the workers; ``auto`` picks ``cuda`` when available, else ``cpu``."""

    seed: int = 1
    """Seed of the workers' random number generators."""

    balance_batch: bool = True
    """Reorder each batch so every worker gets about the same number of tokens."""

    total_epochs: int = bounded_field(30, gt=0)
    """Passes over the training set."""

    total_training_steps: int | None = bounded_field(None, gt=0)
    """Stop after this many steps; null runs ``total_epochs`` full epochs."""

    critic_warmup: int = bounded_field(0, ge=0)
    """Steps that train only the critic before the actor starts updating."""

    test_freq: int = -1
    """Validate every this many steps; -1 disables periodic validation."""

    val_before_train: bool = True
    """Validate once before the first training step."""

    val_only: bool = False
    """Only validate, then exit."""

    save_freq: int = -1
    """Save a checkpoint every this many steps; -1 disables periodic saving."""

    default_local_dir: str = "checkpoints"
    """Checkpoint root folder; the shipped YAML appends ``project_name/experiment_name``."""

    default_hdfs_dir: str | None = None
    """After each save, copy the new ``global_step_N`` folder and the tracker file here (a local folder, or an
    ``hdfs://`` URI, which needs the Hadoop ``hdfs`` command); null keeps checkpoints only in ``default_local_dir``."""

    del_local_ckpt_after_load: bool = False
    """After resuming, delete the checkpoint's actor and critic folders (model and optimizer shards; the trainer state
    stays)."""

    max_actor_ckpt_to_keep: int | None = bounded_field(None, gt=0)
    """Most actor checkpoints kept (oldest deleted first); null keeps all."""

    max_critic_ckpt_to_keep: int | None = bounded_field(None, gt=0)
    """Most critic checkpoints kept (oldest deleted first); null keeps all."""

    use_legacy_worker_impl: Any = choice_field("auto", ("auto", "disable", False))
    """verl's switch between its legacy and new worker classes; this build has one worker implementation (roles
    composed in ``verl.workers.fsdp_workers``), selected by every allowed value."""

    ray_wait_register_center_timeout: int = bounded_field(300, gt=0)
    """Seconds to wait for the workers to register with Ray."""

    placement: PlacementConfig = field(default_factory=PlacementConfig)
    """Resource pools of the worker groups (split placement); empty: everything on ``global_pool``."""

    def resolved_device(self) -> str:
        """The device to use: ``device``, with ``auto`` turned into ``cuda`` when torch sees one, else ``cpu``."""
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class RayInitConfig(BaseConfig):
    """Arguments of ``ray.init``."""

    num_cpus: int | None = bounded_field(None, gt=0)
    """CPUs Ray may use; null lets Ray detect them."""


@dataclass
class RayKwargsConfig(BaseConfig):
    """How the Ray cluster is started and traced."""

    ray_init: RayInitConfig = field(default_factory=RayInitConfig)
    """Arguments of ``ray.init``."""

    timeline_json_file: str | None = None
    """Write Ray's task timeline (chrome tracing json) to this file at the end of training."""
