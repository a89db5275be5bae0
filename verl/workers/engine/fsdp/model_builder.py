"""Build the Hugging Face module the FSDP engine trains: causal LM (actor/ref) or a scalar-value model (critic).

Applies ``override_config``, Liger kernels (``use_liger``), gradient checkpointing, LoRA through peft (only
adapters trainable) and picks the attention implementation: ``verl_varlen`` (varlen kernels for packed
sequences, :mod:`verl.workers.engine.fsdp.attention`) unless ``override_config.attn_implementation`` names another.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from verl.utils.device import is_cuda_available
from verl.workers.engine.fsdp.attention import VARLEN_ATTENTION, cuda_varlen_available


@dataclass
class ModelSettings:
    """What the builder needs from ``HFModelConfig`` (verl's field names)."""

    path: str
    trust_remote_code: bool = False
    override_config: dict[str, Any] = field(default_factory=dict)
    enable_gradient_checkpointing: bool = False
    enable_activation_offload: bool = False
    use_liger: bool = False
    use_remove_padding: bool = True
    lora_rank: int = 0
    lora_alpha: int = 16
    target_modules: Any = "all-linear"
    exclude_modules: Any = None
    tokenizer_path: str | None = None

    @classmethod
    def from_config(cls, model_config) -> ModelSettings:
        """Read a typed ``HFModelConfig`` or a DictConfig with the same keys."""
        if isinstance(model_config, ModelSettings):
            return model_config
        if model_config is None or getattr(model_config, "path", None) in (None, ""):
            raise ValueError("model config needs 'path' (a local folder or hub id of a Hugging Face model)")
        values = {}
        for name in cls.__dataclass_fields__:
            if _has(model_config, name) and getattr(model_config, name) is not None:
                values[name] = _plain(getattr(model_config, name))
        from verl.workers.config.model import resolve_model_path  # "default" → the embedded SmolLM2

        values["path"] = resolve_model_path(values["path"])
        return cls(**values)


def _has(config, name: str) -> bool:
    try:
        return name in config  # DictConfig / dict
    except TypeError:
        return hasattr(config, name)


def _plain(value):
    """DictConfig/ListConfig → plain python containers."""
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(value):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf is a dependency
        pass
    return value


def pick_attn_implementation() -> str:
    """``verl_varlen`` (:mod:`verl.workers.engine.fsdp.attention`) when this device has a varlen kernel for it,
    flash_attention_2 on GPU when only that package is installed, else sdpa (correct for packed sequences)."""
    if cuda_varlen_available() or not is_cuda_available():
        return VARLEN_ATTENTION
    if importlib.util.find_spec("flash_attn") is not None:
        return "flash_attention_2"
    return "sdpa"


def load_hf_config(settings: ModelSettings):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(settings.path, trust_remote_code=settings.trust_remote_code)
    for key, value in (settings.override_config or {}).items():
        if key in ("attn_implementation",):
            continue
        setattr(config, key, value)
    return config


def build_module(settings: ModelSettings, role: str, dtype: torch.dtype) -> nn.Module:
    """Load the pretrained weights for ``role`` (``"actor"``/``"ref"`` → causal LM, ``"critic"`` → values).

    The critic is ``AutoModelForTokenClassification`` with ``num_labels=1``: the LM backbone plus a freshly
    initialised linear value head (``score``), giving values of shape ``(batch, seq, 1)``.
    """
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification

    hf_config = load_hf_config(settings)
    attn = (settings.override_config or {}).get("attn_implementation") or pick_attn_implementation()
    common = dict(dtype=dtype, trust_remote_code=settings.trust_remote_code, attn_implementation=attn)
    if role == "critic":
        hf_config.num_labels = 1
        hf_config.classifier_dropout = 0.0
        module = AutoModelForTokenClassification.from_pretrained(settings.path, config=hf_config, **common)
    elif role in ("actor", "ref"):
        module = AutoModelForCausalLM.from_pretrained(settings.path, config=hf_config, **common)
    else:
        raise ValueError(f"unknown engine role {role!r}; expected one of ['actor', 'critic', 'ref']")
    module.config.use_cache = False
    if settings.use_liger:
        from verl.workers.engine.fsdp.liger import apply_liger

        apply_liger(module)
    if settings.enable_gradient_checkpointing and role != "ref":
        module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if settings.lora_rank > 0 and role != "ref":
        module = apply_lora(module, settings)
    if role == "ref":
        module.requires_grad_(False)
    return module


def apply_lora(module: nn.Module, settings: ModelSettings) -> nn.Module:
    """Wrap with peft LoRA; afterwards only ``lora_A``/``lora_B`` (and a critic's value head) require grad."""
    from peft import LoraConfig, TaskType, get_peft_model

    if settings.enable_gradient_checkpointing:
        module.enable_input_require_grads()
    is_critic = getattr(module.config, "num_labels", None) == 1 and not hasattr(module, "lm_head")
    lora_config = LoraConfig(
        task_type=TaskType.TOKEN_CLS if is_critic else TaskType.CAUSAL_LM,
        r=settings.lora_rank,
        lora_alpha=settings.lora_alpha,
        target_modules=settings.target_modules,
        exclude_modules=settings.exclude_modules,
        bias="none",
    )
    return get_peft_model(module, lora_config)
