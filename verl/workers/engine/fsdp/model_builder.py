"""Build the Hugging Face module the FSDP engine trains: causal LM (actor/ref) or a scalar-value model (critic).

Applies ``override_config``, Liger kernels (``use_liger``), gradient checkpointing, LoRA through peft (only
adapters trainable) and picks the attention implementation: ``verl_varlen`` (varlen kernels for packed
sequences, :mod:`verl.workers.engine.fsdp.attention`) unless ``override_config.attn_implementation`` names another.
"""

from __future__ import annotations

import torch
from torch import nn

from verl.workers.config import HFModelConfig
from verl.workers.engine.fsdp.attention import VARLEN_ATTENTION
from verl.workers.engine.fsdp.packing import keep_text_boundaries_out_of_encoders


def pick_attn_implementation() -> str:
    """``verl_varlen`` (:mod:`verl.workers.engine.fsdp.attention`): every device has a packed kernel for it (sdpa per
    sequence on CPU, the padded flash batch or torch's varlen kernel on CUDA)."""
    return VARLEN_ATTENTION


def load_hf_config(model_config: HFModelConfig):
    """The model's Hugging Face config with ``override_config`` applied (``attn_implementation`` is a load option)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_config.local_path, trust_remote_code=model_config.trust_remote_code)
    for key, value in model_config.override_config.items():
        if key in ("attn_implementation",):
            continue
        setattr(config, key, value)
    return config


VISION_TOWER_NAMES = ("visual", "vision_tower", "vision_model")


def is_vision_language(hf_config) -> bool:
    """True for a config with a vision tower (Qwen2-VL, Qwen2.5-VL, ...)."""
    return getattr(hf_config, "vision_config", None) is not None


def vision_tower(module: nn.Module) -> nn.Module | None:
    """The vision encoder submodule of a vision-language model (``model.visual`` for Qwen2-VL), else None."""
    for name, sub in module.named_modules():
        if name.rsplit(".", 1)[-1] in VISION_TOWER_NAMES:
            return sub
    return None


def build_module(model_config: HFModelConfig, role: str, dtype: torch.dtype) -> nn.Module:
    """Load the pretrained weights for ``role`` (``"actor"``/``"ref"`` → causal LM, ``"critic"`` → values,
    ``"reward"`` → a frozen reward model, see :func:`verl.workers.reward_model.loading.build_reward_module`).

    A vision-language model loads with ``AutoModelForImageTextToText`` (its vision tower included). The critic
    is ``AutoModelForTokenClassification`` with ``num_labels=1``: the LM backbone plus a freshly initialised
    linear value head (``score``), giving values of shape ``(batch, seq, 1)``.
    """
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoModelForTokenClassification

    path = model_config.local_path
    hf_config = load_hf_config(model_config)
    attn = model_config.override_config.get("attn_implementation") or pick_attn_implementation()
    common = dict(dtype=dtype, trust_remote_code=model_config.trust_remote_code, attn_implementation=attn)
    if role == "reward":  # frozen scorer: no checkpointing, LoRA or gradients
        from verl.workers.reward_model.loading import build_reward_module

        module = build_reward_module(path, hf_config, common)
        module.config.use_cache = False
        return module
    if role == "critic" and is_vision_language(hf_config):
        raise ValueError(
            f"{path} is a vision-language model: a critic (value model) for it is not supported; use a "
            "critic-free estimator (algorithm.adv_estimator=grpo, rloo, reinforce_plus_plus, ...)"
        )
    if role == "critic":
        hf_config.num_labels = 1
        hf_config.classifier_dropout = 0.0
        module = AutoModelForTokenClassification.from_pretrained(path, config=hf_config, **common)
    elif role in ("actor", "ref"):
        model_class = AutoModelForImageTextToText if is_vision_language(hf_config) else AutoModelForCausalLM
        module = model_class.from_pretrained(path, config=hf_config, **common)
        if is_vision_language(hf_config) and (tower := vision_tower(module)) is not None:
            keep_text_boundaries_out_of_encoders(tower)
    else:
        raise ValueError(f"unknown engine role {role!r}; expected one of ['actor', 'critic', 'ref', 'reward']")
    module.config.use_cache = False
    if model_config.use_liger:
        from verl.workers.engine.fsdp.liger import apply_liger

        apply_liger(module)
    if model_config.enable_gradient_checkpointing and role != "ref":
        module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if model_config.lora_rank > 0 and role != "ref":
        module = apply_lora(module, model_config)
    if role == "ref":
        module.requires_grad_(False)
    return module


def apply_lora(module: nn.Module, model_config: HFModelConfig) -> nn.Module:
    """Wrap with peft LoRA; afterwards only ``lora_A``/``lora_B`` (and a critic's value head) require grad."""
    from peft import LoraConfig, TaskType, get_peft_model

    if model_config.enable_gradient_checkpointing:
        module.enable_input_require_grads()
    is_critic = getattr(module.config, "num_labels", None) == 1 and not hasattr(module, "lm_head")
    lora_config = LoraConfig(
        task_type=TaskType.TOKEN_CLS if is_critic else TaskType.CAUSAL_LM,
        r=model_config.lora_rank,
        lora_alpha=model_config.lora_alpha,
        target_modules=model_config.target_modules,
        exclude_modules=model_config.exclude_modules,
        bias="none",
    )
    return get_peft_model(module, lora_config)
