"""Resolve the sampling settings of one ``generate_sequences`` call from the rollout config and ``meta_info``.

Precedence (verl's): ``meta_info["do_sample"] is False`` -> greedy with one sample; ``meta_info["validate"]``
-> ``val_kwargs`` (one sample per row: the trainer already repeated validation rows ``val_kwargs.n`` times;
greedy when ``val_kwargs.do_sample`` is False); otherwise the config, where ``meta_info`` keys ``temperature``,
``top_p``, ``top_k``, ``n`` and ``response_length`` override the config for that batch only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verl.workers.config.rollout import RolloutConfig


@dataclass(frozen=True)
class SamplingSettings:
    """What one rollout call samples. ``temperature == 0`` means greedy; ``top_k <= 0`` means no top-k cut."""

    n: int
    temperature: float
    top_p: float
    top_k: int
    response_length: int
    eos_token_ids: tuple[int, ...]
    pad_token_id: int

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


def _as_id_tuple(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(int(v) for v in value)


def resolve_special_ids(meta_info: dict, tokenizer: Any, generation_eos: Any = None) -> tuple[tuple[int, ...], int]:
    """EOS ids and pad id: ``meta_info`` first, then the model's generation config, then the tokenizer.

    The pad id falls back to the first EOS id (SmolLM2's tokenizer pads with ``<|im_end|>``).
    """
    eos = _as_id_tuple(meta_info.get("eos_token_id"))
    if not eos:
        eos = _as_id_tuple(generation_eos)
    if not eos and tokenizer is not None:
        eos = _as_id_tuple(tokenizer.eos_token_id)
    if not eos:
        raise ValueError(
            "rollout: no EOS token id: set meta_info['eos_token_id'] or give the model a tokenizer with eos_token_id"
        )
    pad = meta_info.get("pad_token_id")
    if pad is None and tokenizer is not None:
        pad = tokenizer.pad_token_id
    if pad is None:
        pad = eos[0]
    return eos, int(pad)


def resolve_sampling(
    config: RolloutConfig, meta_info: dict, eos_token_ids: tuple[int, ...], pad_token_id: int
) -> SamplingSettings:
    """Sampling settings for one batch; see the module docstring for the precedence."""
    response_length = int(meta_info.get("response_length", config.response_length))
    if response_length <= 0:
        raise ValueError(f"rollout.response_length must be positive, got {response_length}")
    common = dict(response_length=response_length, eos_token_ids=eos_token_ids, pad_token_id=pad_token_id)
    greedy = dict(n=1, temperature=0.0, top_p=1.0, top_k=-1, **common)

    do_sample = meta_info.get("do_sample", config.do_sample)
    if not do_sample:
        return SamplingSettings(**greedy)
    if meta_info.get("validate", False):
        val = config.val_kwargs
        if not val.do_sample:
            return SamplingSettings(**greedy)
        return SamplingSettings(
            n=1,
            temperature=float(val.temperature),
            top_p=float(val.top_p),
            top_k=int(val.top_k),
            **common,
        )
    settings = SamplingSettings(
        n=int(meta_info.get("n", config.n)),
        temperature=float(meta_info.get("temperature", config.temperature)),
        top_p=float(meta_info.get("top_p", config.top_p)),
        top_k=int(meta_info.get("top_k", config.top_k)),
        **common,
    )
    if settings.n < 1:
        raise ValueError(f"rollout.n must be >= 1, got {settings.n}")
    if not 0.0 < settings.top_p <= 1.0:
        raise ValueError(f"rollout.top_p must be in (0, 1], got {settings.top_p}")
    if settings.temperature < 0:
        raise ValueError(f"rollout.temperature must be >= 0, got {settings.temperature}")
    return settings


PLACEHOLDER_BIAS = -100.0
"""vLLM's lowest ``logit_bias`` (it clamps to [-100, 100]): ``exp(-100)`` rules a token out in practice."""


def vision_placeholder_bias(hf_config: Any) -> dict[int, float]:
    """``{token id: PLACEHOLDER_BIAS}`` for a vision-language model's image/video placeholder ids, else ``{}``.

    A placeholder in a response has no image features behind it: the training forward then fails in
    transformers ("Image features and image tokens do not match", verl-project/verl#3469). A random-weight
    Qwen2-VL samples them at ~2/151936 per token (issue 21), a trained one rarely, so the rollout bans them."""
    return {token: PLACEHOLDER_BIAS for token in vision_placeholder_ids(hf_config)}


def vision_placeholder_ids(hf_config: Any) -> list[int]:
    """A vision-language model's image/video placeholder token ids (``image_token_id``, ``video_token_id``), sorted;
    ``[]`` for a text model. What every rollout bans and the actor refuses in a response."""
    ids = (getattr(hf_config, name, None) for name in ("image_token_id", "video_token_id"))
    return sorted({int(token) for token in ids if token is not None})
