"""Shared pieces of the model mergers: the config, the backend registry and the Hugging Face writer."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import torch

from verl.utils.registry import Registry

MERGER_BACKENDS: Registry[type] = Registry(
    "model merger backend", "--backend", package="verl.model_merger", decorator="register_model_merger"
)


def register_model_merger(name: str) -> Callable[[type], type]:
    """Class decorator adding a checkpoint format under ``name`` (``--backend``)."""
    return MERGER_BACKENDS.register(name)


def get_model_merger_cls(name: str) -> type:
    """The merger registered as ``name``; unknown names fail listing the registered ones."""
    return MERGER_BACKENDS.get(name)


@dataclass
class ModelMergerConfig:
    operation: str
    backend: str
    local_dir: str
    target_dir: str
    hf_model_path: str | None = None
    trust_remote_code: bool = False
    tie_word_embedding: bool = False

    def __post_init__(self) -> None:
        if self.operation != "merge":
            raise ValueError(f"unknown operation {self.operation!r}; expected 'merge'")
        if not os.path.isdir(self.local_dir):
            raise FileNotFoundError(f"--local_dir {self.local_dir!r} is not a folder")
        if self.hf_model_path is None:
            self.hf_model_path = os.path.join(self.local_dir, "huggingface")


def save_hf_model(
    state_dict: dict[str, torch.Tensor], hf_model_path: str, target_dir: str, trust_remote_code: bool = False
) -> None:
    """Instantiate the architecture of ``hf_model_path`` on the meta device, load ``state_dict`` into it and
    write safetensors + config (+ generation config and tokenizer when present) to ``target_dir``."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

    config = AutoConfig.from_pretrained(hf_model_path, trust_remote_code=trust_remote_code)
    architectures = list(getattr(config, "architectures", None) or [])
    auto_cls = AutoModelForTokenClassification if any("TokenClassification" in a for a in architectures) else None
    auto_cls = auto_cls or AutoModelForCausalLM
    dtype = next(iter(state_dict.values())).dtype
    with torch.device("meta"):
        model = auto_cls.from_config(config, dtype=dtype, trust_remote_code=trust_remote_code)
    model.to_empty(device="cpu")
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    tied = set(getattr(model, "_tied_weights_keys", None) or [])
    missing = [
        k
        for k in missing
        if k not in tied and not (getattr(config, "tie_word_embeddings", False) and k == "lm_head.weight")
    ]
    if missing or unexpected:
        raise RuntimeError(
            f"checkpoint does not match {architectures}: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    if getattr(config, "tie_word_embeddings", False):
        model.tie_weights()
    os.makedirs(target_dir, exist_ok=True)
    model.save_pretrained(target_dir, safe_serialization=True)
    try:
        from transformers import GenerationConfig

        GenerationConfig.from_pretrained(hf_model_path).save_pretrained(target_dir)
    except OSError:
        pass
    try:
        AutoTokenizer.from_pretrained(hf_model_path, trust_remote_code=trust_remote_code).save_pretrained(target_dir)
    except (OSError, ValueError):
        pass
