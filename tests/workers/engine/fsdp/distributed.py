"""Run a function on N local ranks (torch.multiprocessing.spawn) with gloo on CPU or nccl on GPUs, and
collect what each rank returns. Functions must be module-level (picklable)."""

from __future__ import annotations

import gc
import os
import socket
import tempfile
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _entry(rank: int, world_size: int, port: int, out_dir: str, fn: Callable, args: tuple) -> None:
    from verl.utils.device import get_nccl_backend, is_cuda_available

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size))
    os.environ["LOCAL_RANK"] = str(rank)
    torch.set_num_threads(1)
    if is_cuda_available():
        torch.cuda.set_device(rank)
    dist.init_process_group(get_nccl_backend(), rank=rank, world_size=world_size)
    try:
        torch.manual_seed(0)
        result = fn(rank, world_size, *args)
        # Every rank's collectives are done before any rank tears down: without it, a gloo worker thread could
        # still hold the last work's tensors at exit and abort the process (1 run in 12-15 of test_full_gather's
        # coalesced gathers did; pytorch/pytorch#179291 describes the crash). The collection first frees what
        # reference cycles still hold (FSDP2 modules and their hooks) while the process group is alive: left to the
        # interpreter's exit, ranks of a 2-rank update with reshard_after_forward=False aborted the same way in 5 of
        # 60 runs, and in 0 of 60 with it.
        gc.collect()
        dist.barrier()
    finally:
        dist.destroy_process_group()
    torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))


def run_on_ranks(fn: Callable, world_size: int, *args: Any) -> list[Any]:
    """``[fn(rank, world_size, *args) for rank]`` run in ``world_size`` spawned processes."""
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_entry, args=(world_size, free_port(), out_dir, fn, args), nprocs=world_size, join=True)
        return [torch.load(os.path.join(out_dir, f"rank{r}.pt"), weights_only=False) for r in range(world_size)]


def rollout_batch(
    batch_size: int = 8, prompt_length: int = 6, response_length: int = 5, seed: int = 0, vocab: int = 1000
) -> dict[str, torch.Tensor]:
    """A synthetic rollout batch laid out like verl's: left-padded prompts, right-padded responses,
    ``position_ids`` from the attention mask, ``response_mask`` for the valid response tokens."""
    gen = torch.Generator().manual_seed(seed)
    prompts = torch.randint(3, vocab, (batch_size, prompt_length), generator=gen)
    responses = torch.randint(3, vocab, (batch_size, response_length), generator=gen)
    prompt_lens = torch.randint(1, prompt_length + 1, (batch_size,), generator=gen)
    response_lens = torch.randint(1, response_length + 1, (batch_size,), generator=gen)
    prompt_mask = (torch.arange(prompt_length) >= prompt_length - prompt_lens[:, None]).long()
    response_mask = (torch.arange(response_length) < response_lens[:, None]).long()
    attention_mask = torch.cat([prompt_mask, response_mask], dim=1)
    input_ids = torch.cat([prompts, responses], dim=1) * attention_mask + 2 * (1 - attention_mask)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return {
        "prompts": input_ids[:, :prompt_length],
        "responses": input_ids[:, prompt_length:],
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "response_mask": response_mask,
    }


def reference_log_probs(model, batch: dict[str, torch.Tensor], temperature: float = 1.0) -> torch.Tensor:
    """Plain HF forward of each sequence alone (no padding at all): log-probs ``(bs, R)`` of the responses,
    zero outside the response mask."""
    response_length = batch["responses"].shape[1]
    out = torch.zeros(batch["responses"].shape, dtype=torch.float32)
    for row in range(batch["input_ids"].shape[0]):
        valid = batch["attention_mask"][row].bool()
        ids = batch["input_ids"][row][valid]
        logits = model(input_ids=ids[None]).logits[0].float() / temperature
        log_probs = torch.log_softmax(logits[:-1], dim=-1).gather(-1, ids[1:, None])[:, 0]
        n_resp = int(batch["response_mask"][row].sum())
        out[row, :n_resp] = log_probs[len(ids) - 1 - n_resp :]
    assert out.shape[1] == response_length
    return out


def build_actor(
    model_path: str, world: int, batch_size: int, lora_rank: int = 0, warmup_steps: int = 2, **actor_overrides
):
    """An FSDP engine + DataParallelPPOActor for tests (token-mean PPO, AdamW, warmup then cosine)."""
    from verl.workers.actor import DataParallelPPOActor
    from verl.workers.config import FSDPActorConfig, FSDPEngineConfig, HFModelConfig, OptimConfig
    from verl.workers.engine.fsdp.engine import FSDPEngine

    optim = OptimConfig(lr=1e-3, lr_warmup_steps=warmup_steps, total_training_steps=10, lr_scheduler_type="cosine")
    fields = dict(ppo_mini_batch_size=batch_size // world, ppo_micro_batch_size_per_gpu=2, optim=optim)
    config = FSDPActorConfig(**(fields | actor_overrides))
    model_config = HFModelConfig(
        path=model_path,
        use_remove_padding=True,
        lora_rank=lora_rank,
        lora_alpha=16,
        enable_gradient_checkpointing=False,
    )
    engine = FSDPEngine(model_config, FSDPEngineConfig(), optim, role="actor").initialize()
    return engine, DataParallelPPOActor(config, engine.module, engine.optimizer, use_remove_padding=True)


def update_batch(seed: int, batch_size: int = 8) -> dict[str, torch.Tensor]:
    """A rollout batch with random old log-probs and advantages (enough for a PPO step)."""
    batch = rollout_batch(batch_size=batch_size, seed=seed)
    gen = torch.Generator().manual_seed(seed + 100)
    mask = batch["response_mask"].float()
    batch["old_log_probs"] = (-7.0 + 0.3 * torch.randn(mask.shape, generator=gen)) * mask
    batch["advantages"] = torch.randn(mask.shape, generator=gen) * mask
    return batch


def rank_share(batch: dict[str, torch.Tensor], rank: int, world: int, meta_info: dict | None = None):
    """This rank's contiguous chunk of ``batch`` as a DataProto."""
    from verl.protocol import DataProto

    return DataProto.from_dict(tensors=batch, meta_info=meta_info or {"temperature": 1.0}).chunk(world)[rank]


@contextmanager
def counting_gathers():
    """``{parameter group id: all-gathers}`` while inside: the ``unshard`` calls that issued one (a prefetch's gather
    is pending until its wait, and a second ``unshard`` then returns without gathering)."""
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

    counts: Counter = Counter()
    original = FSDPParamGroup.unshard

    def unshard(group, *args, **kwargs):
        idle = group._all_gather_result is None
        out = original(group, *args, **kwargs)
        if idle and group._all_gather_result is not None:
            counts[id(group)] += 1
        return out

    FSDPParamGroup.unshard = unshard
    try:
        yield counts
    finally:
        FSDPParamGroup.unshard = original
