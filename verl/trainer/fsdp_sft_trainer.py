"""Supervised fine-tuning with the FSDP2 engine of the RL trainer.

Launch (one node, N processes; gloo on CPU)::

    torchrun --standalone --nproc_per_node=N -m verl.trainer.fsdp_sft_trainer \\
        data.train_files=train.parquet data.val_files=test.parquet model.partial_pretrain=<hf model> ...

One step: every rank takes its slice of the seeded global batch, runs it in micro-batches of
``data.micro_batch_size_per_gpu`` and accumulates ``grad sum_t -log p(x_{t+1} | x_{<=t})`` over the target
tokens (``loss_mask``), normalised so the summed loss is the token mean of the global batch; then clip, step,
advance the schedule. Validation reports the token-mean NLL of the validation set.

With ``ulysses_sequence_parallel_size=sp`` the ranks form ``world / sp`` data-parallel groups of ``sp``: the ranks of
a group take the same slice of the batch and split each packed micro-batch along the sequence
(``verl.workers.engine.fsdp.ulysses``); token counts and metrics are summed over the data-parallel ranks only.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import hydra
import torch
from omegaconf import DictConfig

from verl.trainer.config.sft import SFTConfig, validate_typed
from verl.trainer.sft.checkpointing import load_sft_checkpoint, save_sft_checkpoint
from verl.trainer.sft.data import create_sft_dataset, create_train_stream, create_val_loader
from verl.trainer.sft.distributed import all_reduce_sum, import_external_lib, init_distributed, resolve_device
from verl.trainer.sft.loss import loss_normalizer, next_token_target_mask, sft_nll_sum
from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager
from verl.workers.config.model import DEFAULT_MODEL_PATH
from verl.workers.engine.fsdp.engine import FSDPEngine
from verl.workers.engine.fsdp.forward import forward_log_probs
from verl.workers.engine.fsdp.ulysses import create_ulysses_mesh

BATCH_KEYS = ("input_ids", "attention_mask", "position_ids", "loss_mask")


def check_batch_sizes(config: SFTConfig, dp_size: int) -> int:
    """This rank's examples per step; fails naming the keys when the batch sizes do not divide. ``dp_size`` is
    the number of data-parallel ranks (the world size / ``ulysses_sequence_parallel_size``)."""
    data = config.data
    if data.micro_batch_size is not None:  # verl's deprecated global micro batch size
        data.micro_batch_size_per_gpu = max(1, data.micro_batch_size // dp_size)
    if data.train_batch_size % dp_size:
        raise ValueError(
            f"data.train_batch_size={data.train_batch_size} must be divisible by the {dp_size} data-parallel ranks "
            "(world size / ulysses_sequence_parallel_size)"
        )
    per_rank = data.train_batch_size // dp_size
    if per_rank % data.micro_batch_size_per_gpu:
        raise ValueError(
            f"data.train_batch_size / data-parallel ranks = {per_rank} must be divisible by "
            f"data.micro_batch_size_per_gpu={data.micro_batch_size_per_gpu}"
        )
    return per_rank


def check_sequence_parallel(config: SFTConfig) -> None:
    """``ulysses_sequence_parallel_size > 1`` splits packed sequences: it needs remove-padding."""
    if config.ulysses_sequence_parallel_size > 1 and not config.model.use_remove_padding:
        raise ValueError(
            f"ulysses_sequence_parallel_size={config.ulysses_sequence_parallel_size} needs use_remove_padding=True"
        )


class FSDPSFTTrainer:
    """Holds the engine, the data streams, the checkpoint manager and the tracker of one SFT run."""

    def __init__(self, config: SFTConfig, tokenizer, train_dataset, val_dataset=None, device: str = "cpu"):
        import torch.distributed as dist

        self.config = config
        self.tokenizer = tokenizer
        self.device = torch.device(device if device == "cpu" else f"cuda:{torch.cuda.current_device()}")
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        check_sequence_parallel(config)
        self.ulysses = create_ulysses_mesh(config.ulysses_sequence_parallel_size)
        self.dp_size, self.dp_group = self.ulysses.dp_size, self.ulysses.dp_group
        check_batch_sizes(config, self.dp_size)
        trainer = config.trainer
        self.train_stream = create_train_stream(
            train_dataset,
            config.data.train_batch_size,
            config.data.shuffle,
            trainer.seed,
            self.ulysses.dp_rank,
            self.dp_size,
        )
        self.val_loader = create_val_loader(
            val_dataset, config.data.micro_batch_size_per_gpu, self.ulysses.dp_rank, self.dp_size
        )
        steps_per_epoch = len(self.train_stream)
        self.total_training_steps = steps_per_epoch * trainer.total_epochs
        if trainer.total_training_steps is not None:
            self.total_training_steps = min(self.total_training_steps, trainer.total_training_steps)
        optim = dataclasses.replace(  # verl's SFT spellings win over the RL keys they alias
            config.optim,
            total_training_steps=self.total_training_steps,
            lr_warmup_steps_ratio=config.optim.warmup_steps_ratio,
            lr_scheduler_type=config.optim.lr_scheduler,
        )
        self.engine = FSDPEngine(
            config.model, config.model.fsdp_config, optim, role="actor", ulysses_mesh=self.ulysses
        ).initialize()
        self.checkpoint_manager = FSDPCheckpointManager(
            self.engine.module, self.engine.optimizer, self.engine.lr_scheduler, processing_class=tokenizer
        )
        self.tracker = None
        if self.rank == 0:
            from verl.utils.tracking import Tracking

            self.tracker = Tracking(trainer.project_name, trainer.experiment_name, trainer.logger, config=config)

    # ------------------------------------------------------------------ one step
    def _micro_batches(self, batch: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
        size = self.config.data.micro_batch_size_per_gpu
        rows = batch["input_ids"].shape[0]
        return [{k: batch[k][i : i + size].to(self.device) for k in BATCH_KEYS} for i in range(0, rows, size)]

    def _nll_sum(self, micro_batch: dict[str, torch.Tensor]) -> torch.Tensor:
        log_probs, _ = forward_log_probs(
            self.engine.forward_module,
            micro_batch["input_ids"],
            micro_batch["attention_mask"],
            micro_batch["position_ids"],
            use_remove_padding=self.config.model.use_remove_padding,
            ulysses=self.ulysses,
        )
        return sft_nll_sum(log_probs, micro_batch["loss_mask"])

    def training_step(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        """One optimizer step on this rank's slice of the global batch; returns the step's metrics."""
        self.engine.train_mode()
        micro_batches = self._micro_batches(batch)
        local_tokens = float(sum(next_token_target_mask(mb["loss_mask"]).sum() for mb in micro_batches))
        global_tokens = all_reduce_sum([local_tokens], self.dp_group)[0]
        normalizer = loss_normalizer(local_tokens, global_tokens, self.dp_size, self.config.data.balance_dp_token)
        step_loss = 0.0
        for micro_batch in micro_batches:
            loss = self._nll_sum(micro_batch) / normalizer
            self.engine.backward(loss)
            step_loss += float(loss.detach())
        grad_norm = self.engine.clip_and_step()
        lr = self.engine.lr_scheduler_step()
        return {
            "train/loss": all_reduce_sum([step_loss], self.dp_group)[0],
            "train/lr(1e-3)": lr * 1e3,
            "train/grad_norm": grad_norm,
            "train/num_target_tokens": global_tokens,
        }

    @torch.no_grad()
    def validation_step(self) -> dict[str, float]:
        """Token-mean NLL of the validation set (every rank's share, summed over ranks)."""
        self.engine.eval_mode()
        nll, tokens = 0.0, 0.0
        for batch in self.val_loader:
            micro_batch = {k: batch[k].to(self.device) for k in BATCH_KEYS}
            nll += float(self._nll_sum(micro_batch))
            tokens += float(next_token_target_mask(micro_batch["loss_mask"]).sum())
        nll, tokens = all_reduce_sum([nll, tokens], self.dp_group)
        return {"val/loss": nll / max(tokens, 1.0)}

    # ------------------------------------------------------------------ the loop
    def _log(self, metrics: dict[str, float], step: int) -> None:
        if self.tracker is not None:
            self.tracker.log(metrics, step=step)

    def save_checkpoint(self, global_step: int) -> str:
        trainer = self.config.trainer
        return save_sft_checkpoint(
            self.checkpoint_manager,
            trainer.default_local_dir,
            global_step,
            self.train_stream.state_dict(),
            trainer.max_ckpt_to_keep,
            checksums=trainer.checkpoint_checksum,
        )

    def load_checkpoint(self) -> int:
        """Resume per ``trainer.resume_mode``; returns the global step to continue from (0 on a fresh start)."""
        state = load_sft_checkpoint(self.checkpoint_manager, self.config.trainer)
        if state is None:
            return 0
        self.train_stream.load_state_dict(state["data_stream"])
        if self.rank == 0:
            print(f"resumed from global step {state['global_step']} ({self.config.trainer.default_local_dir})")
        return int(state["global_step"])

    def fit(self) -> None:
        trainer = self.config.trainer
        global_step = self.load_checkpoint()
        last_val: dict[str, float] = {}
        if global_step >= self.total_training_steps:
            if self.rank == 0:
                print(f"nothing to do: resumed at step {global_step} of {self.total_training_steps}")
            return
        for batch in self.train_stream.iter_epochs(trainer.total_epochs):
            start = time.perf_counter()
            metrics = self.training_step(batch)
            global_step += 1
            is_last = global_step >= self.total_training_steps
            metrics["train/epoch"] = float(self.train_stream.epoch)
            metrics["timing_s/step"] = time.perf_counter() - start
            if self.val_loader is not None and (
                is_last or (trainer.test_freq > 0 and global_step % trainer.test_freq == 0)
            ):
                last_val = self.validation_step()
                metrics.update(last_val)
            self._log(metrics, global_step)
            if is_last or _every(trainer.save_freq, global_step):
                self.save_checkpoint(global_step)
            if is_last:
                break
        if self.rank == 0 and last_val:
            print(f"final validation: {last_val}")
        if self.tracker is not None:
            self.tracker.finish()


def _every(freq: int, step: int) -> bool:
    return freq > 0 and step % freq == 0


def _load_tokenizer(model_config: Any):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        model_config.local_tokenizer_path, trust_remote_code=model_config.trust_remote_code
    )


def run_sft(config: DictConfig | SFTConfig) -> None:
    """Validate ``config``, join the torchrun world and train."""
    import torch.distributed as dist

    config = validate_typed(config, SFTConfig)
    device = resolve_device(config.trainer.device)
    init_distributed(device)
    torch.manual_seed(config.trainer.seed)
    if config.model.path in ("", DEFAULT_MODEL_PATH):  # a typed config built in Python, not from the YAML
        config.model.path = config.model.partial_pretrain
    config.model.use_remove_padding = config.model.use_remove_padding or config.use_remove_padding
    config.model.path = config.model.local_path  # resolve "default" once, before the ranks load
    import_external_lib(config.model.external_lib)
    tokenizer = _load_tokenizer(config.model)
    train_dataset = create_sft_dataset(config.data.train_files, config.data, tokenizer)
    val_dataset = create_sft_dataset(config.data.val_files, config.data, tokenizer) if config.data.val_files else None
    try:
        FSDPSFTTrainer(config, tokenizer, train_dataset, val_dataset, device=device).fit()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


@hydra.main(config_path="config", config_name="sft_trainer", version_base=None)
def main(config: DictConfig) -> None:
    run_sft(config)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
