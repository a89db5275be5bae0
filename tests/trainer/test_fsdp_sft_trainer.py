"""``torchrun --nproc_per_node=2 -m verl.trainer.fsdp_sft_trainer`` on CPU (FSDP2 over gloo).

- SmolLM2, single-turn examples, full fine-tuning, 2 epochs of 2 steps: the second epoch's loss on the same
  examples is below the first's.
- A tiny Llama (SmolLM2's tokenizer), multi-turn conversations, LoRA + gradient checkpointing +
  remove-padding, 24 steps: step 1's loss equals the assistant-token NLL computed in this process with plain
  Hugging Face code and a mask built from the chat template text (so only assistant tokens are trained);
  the loss falls; a run resumed from the step-12 checkpoint reproduces steps 13..24 exactly.
- Ulysses sequence parallelism: one training step with ``ulysses_sequence_parallel_size=2`` on 2 ranks (gradient
  checkpointing, remove-padding) has the loss, grad norm and clipped gradients of the same step in one plain
  process (SP=1).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.support.models import smollm2_path, tiny_model_path
from tests.trainer.test_main_generation import module_overrides
from tests.utils.dataset.test_multiturn_sft_dataset import reference_loss_mask
from tests.workers.engine.fsdp.distributed import run_on_ranks
from verl.trainer.config.loader import CONFIG_DIR, _compose
from verl.trainer.config.sft import SFTConfig, validate_typed

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_sft(tmp_path: Path, name: str, overrides: list[str], timeout: int = 600) -> dict[int, dict]:
    """Run the trainer with 2 ranks; return ``{step: metrics}`` read from the file logger."""
    metrics_path = tmp_path / f"{name}.jsonl"
    env = dict(os.environ, VERL_FILE_LOGGER_PATH=str(metrics_path), OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
        "-m", "verl.trainer.fsdp_sft_trainer",
        "trainer.logger=[console,file]", "trainer.device=cpu", f"trainer.experiment_name={name}", *overrides,
    ]  # fmt: skip
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    records = [json.loads(line) for line in metrics_path.read_text().splitlines()]
    return {record["step"]: record["data"] for record in records}


def arithmetic_rows(count: int) -> list[dict]:
    return [{"question": f"What is {a} plus {a + 3}?", "answer": f"{a} + {a + 3} = {2 * a + 3}."} for a in range(count)]


def conversations(count: int) -> list[list[dict]]:
    rows = []
    for a in range(count):
        rows.append(
            [
                {"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": f"Add {a} and 2."},
                {"role": "assistant", "content": f"{a} plus 2 is {a + 2}."},
                {"role": "user", "content": "Double it."},
                {"role": "assistant", "content": f"That is {2 * (a + 2)}."},
            ]
        )
    return rows


def test_smollm2_sft_loss_falls(tmp_path):
    data = tmp_path / "train.parquet"
    pd.DataFrame(arithmetic_rows(8)).to_parquet(data)
    metrics = run_sft(
        tmp_path,
        "smollm2",
        [
            f"data.train_files={data}",
            f"data.val_files={data}",
            "data.train_batch_size=4",
            "data.micro_batch_size_per_gpu=2",
            "data.max_length=64",
            f"model.partial_pretrain={smollm2_path()}",
            "optim.lr=5e-5",
            "optim.warmup_steps_ratio=0",
            "optim.lr_scheduler=constant",
            "trainer.total_epochs=2",
            f"trainer.default_local_dir={tmp_path / 'ckpt_smollm2'}",
        ],
    )
    losses = [metrics[step]["train/loss"] for step in (1, 2, 3, 4)]
    # each epoch covers the same 8 examples: only the model changed between the two means
    assert (losses[2] + losses[3]) / 2 < 0.9 * (losses[0] + losses[1]) / 2, losses
    assert metrics[4]["val/loss"] < (losses[0] + losses[1]) / 2
    assert (tmp_path / "ckpt_smollm2" / "global_step_4" / "model_optim").is_dir()


def plain_assistant_nll(model_path: str, messages_list: list[list[dict]]) -> float:
    """Token-mean NLL of the assistant tokens of every conversation under the untrained model (one process)."""
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, torch_dtype=torch.float64)
    total, count = 0.0, 0
    with torch.no_grad():
        for messages in messages_list:
            ids, mask = reference_loss_mask(tokenizer, messages)
            logits = model(input_ids=torch.tensor([ids])).logits[0]
            log_probs = torch.log_softmax(logits[:-1], dim=-1).gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]
            target = torch.tensor(mask[1:], dtype=torch.float64)
            total += float(-(log_probs * target).sum())
            count += int(target.sum())
    return total / count


@pytest.mark.slow
def test_tiny_multiturn_lora_masking_and_exact_resume(tmp_path):
    model_path = tiny_model_path("llama")
    data = tmp_path / "chats.parquet"
    chats = conversations(8)
    pd.DataFrame({"messages": chats}).to_parquet(data)
    common = [
        f"data.train_files={data}",
        "data.val_files=null",
        "data.multiturn.enable=true",
        "data.train_batch_size=8",  # the whole set: step 1's loss is over every conversation
        "data.micro_batch_size_per_gpu=2",
        "data.max_length=96",
        "data.balance_dp_token=true",
        f"model.partial_pretrain={model_path}",
        "model.lora_rank=8",
        "model.lora_alpha=16",
        "model.enable_gradient_checkpointing=true",
        "use_remove_padding=true",
        "optim.lr=1e-2",
        "optim.warmup_steps_ratio=0.1",
        "trainer.total_epochs=24",
        "trainer.save_freq=12",
    ]
    full = run_sft(tmp_path, "full", [*common, f"trainer.default_local_dir={tmp_path / 'full'}"])
    assert sorted(full) == list(range(1, 25))
    expected_first = plain_assistant_nll(model_path, chats)
    assert full[1]["train/loss"] == pytest.approx(expected_first, rel=1e-4)
    assert full[24]["train/loss"] < full[1]["train/loss"] - 0.2, [full[s]["train/loss"] for s in sorted(full)]

    resumed = run_sft(
        tmp_path,
        "resumed",
        [
            *common,
            f"trainer.default_local_dir={tmp_path / 'resumed'}",
            "trainer.resume_mode=resume_path",
            f"trainer.resume_from_path={tmp_path / 'full' / 'global_step_12'}",
        ],
    )
    assert sorted(resumed) == list(range(13, 25))
    for step in range(13, 25):
        assert resumed[step]["train/loss"] == pytest.approx(full[step]["train/loss"], rel=1e-6, abs=1e-7), step
        assert resumed[step]["train/lr(1e-3)"] == pytest.approx(full[step]["train/lr(1e-3)"], rel=1e-9)


@pytest.mark.parametrize("script", sorted((REPO_ROOT / "examples" / "sft").rglob("*.sh")), ids=lambda p: p.name)
def test_sft_example_composes(script):
    overrides = module_overrides(script.read_text(), "verl.trainer.fsdp_sft_trainer")
    assert any(arg.startswith("data.train_files=") for arg in overrides)
    validate_typed(_compose(str(CONFIG_DIR), "sft_trainer", overrides), SFTConfig)


def _sft_sp_rank(rank, world, model_path, data_path, checkpoint_dir):
    from verl.trainer.config.sft import SFTDataConfig, SFTModelConfig, SFTOptimConfig, SFTTrainerConfig
    from verl.trainer.fsdp_sft_trainer import FSDPSFTTrainer
    from verl.trainer.sft.data import create_sft_dataset

    config = SFTConfig(
        data=SFTDataConfig(
            train_files=data_path, val_files=None, train_batch_size=4, micro_batch_size_per_gpu=2, max_length=48
        ),
        model=SFTModelConfig(
            path=model_path, partial_pretrain=model_path, use_remove_padding=True, enable_gradient_checkpointing=True
        ),
        optim=SFTOptimConfig(lr=1e-3, warmup_steps_ratio=0.0, lr_scheduler="constant"),
        trainer=SFTTrainerConfig(logger=["console"], default_local_dir=checkpoint_dir, total_epochs=1),
        use_remove_padding=True,
        ulysses_sequence_parallel_size=2,
    )
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    trainer = FSDPSFTTrainer(config, tokenizer, create_sft_dataset(data_path, config.data, tokenizer), device="cpu")
    grads = {}

    def capture_clipped_grads(optimizer, args, kwargs):
        for name, param in trainer.engine.module.named_parameters():
            grads[name] = param.grad.full_tensor() if hasattr(param.grad, "full_tensor") else param.grad.clone()

    trainer.engine.optimizer.register_step_pre_hook(capture_clipped_grads)
    batch = next(iter(trainer.train_stream))
    metrics = trainer.training_step(batch)
    return {"batch": batch, "metrics": metrics, "grads": grads}


@pytest.mark.slow
def test_ulysses_sp2_step_matches_plain_single_process_step(tmp_path):
    model_path = tiny_model_path("qwen2")
    data = tmp_path / "train.parquet"
    pd.DataFrame(arithmetic_rows(4)).to_parquet(data)
    results = run_on_ranks(_sft_sp_rank, 2, model_path, str(data), str(tmp_path / "ckpt"))
    batch = results[0]["batch"]
    for key in ("input_ids", "loss_mask"):  # one data-parallel group: both ranks took the whole batch
        assert torch.equal(results[1]["batch"][key], batch[key])
        assert batch[key].shape[0] == 4

    # the same step in one process: token-mean NLL of the target tokens, gradients clipped to norm 1
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    nll, tokens = 0.0, 0.0
    for row in range(4):
        valid = batch["attention_mask"][row].bool()
        ids = batch["input_ids"][row][valid]
        target = batch["loss_mask"][row][valid][1:].float()
        log_probs = torch.log_softmax(model(input_ids=ids[None]).logits[0, :-1], dim=-1)
        nll = nll - (log_probs.gather(-1, ids[1:, None])[:, 0] * target).sum()
        tokens += float(target.sum())
    loss = nll / tokens
    loss.backward()
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))

    metrics = results[0]["metrics"]
    assert metrics["train/loss"] == pytest.approx(loss.item(), rel=1e-5)
    assert metrics["train/grad_norm"] == pytest.approx(grad_norm, rel=1e-4)
    assert metrics["train/num_target_tokens"] == tokens
    for name, param in model.named_parameters():
        # float32 sums over a few hundred tokens in another order: ~n * 2^-24 of the largest entry
        tolerance = 2e-5 * float(param.grad.abs().max())
        torch.testing.assert_close(results[0]["grads"][name], param.grad, atol=tolerance, rtol=0, msg=name)
