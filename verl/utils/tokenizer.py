"""Load a model's tokenizer (``hf_tokenizer``) and, for vision-language models, its processor (``hf_processor``)."""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["hf_processor", "hf_tokenizer", "is_multimodal_model", "set_pad_token_id"]

logger = logging.getLogger(__name__)


GEMMA2_IT = "gemma-2-2b-it"
"""Model whose hub tokenizer ends chat turns with ``<end_of_turn>`` (id 107) but declares another EOS."""


def set_pad_token_id(tokenizer) -> None:
    """Pad with the EOS token when the tokenizer has no pad token (generation and batching need one)."""
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token_id = tokenizer.eos_token_id
        logger.warning("tokenizer has no pad token: padding with the EOS token (id %s)", tokenizer.eos_token_id)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token


def hf_tokenizer(name_or_path: str, correct_pad_token: bool = True, correct_gemma2: bool = True, **kwargs: Any):
    """``AutoTokenizer.from_pretrained(name_or_path, **kwargs)`` with a pad token (``correct_pad_token``: the EOS token
    when the tokenizer has none) and, for gemma-2-2b-it, ``<end_of_turn>`` as EOS (``correct_gemma2``), as verl.

    ``kwargs`` (``trust_remote_code``, ``padding_side``, ...) go to ``AutoTokenizer.from_pretrained``; an explicit
    ``eos_token`` there wins over the gemma-2 correction."""
    from transformers import AutoTokenizer

    if correct_gemma2 and isinstance(name_or_path, str) and GEMMA2_IT in name_or_path:
        logger.warning("gemma-2-2b-it: using <end_of_turn> (id 107) as the EOS token")
        kwargs.setdefault("eos_token", "<end_of_turn>")
        kwargs.setdefault("eos_token_id", 107)
    tokenizer = AutoTokenizer.from_pretrained(name_or_path, **kwargs)
    if correct_pad_token:
        set_pad_token_id(tokenizer)
    return tokenizer


def is_multimodal_model(name_or_path: str, trust_remote_code: bool = False) -> bool:
    """True when the model's config has a vision tower (``vision_config``)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
    return getattr(config, "vision_config", None) is not None


def hf_processor(name_or_path: str, **kwargs: Any):
    """The multimodal ``AutoProcessor`` of a vision-language model, or ``None`` for a text-only model.

    Like verl, a processor that is only a tokenizer (text models) gives ``None``, so callers branch on
    ``processor is not None``. Without torchvision the processor loads image-only
    (:mod:`verl.utils.processor_compat`). ``kwargs`` (``trust_remote_code``, ...) go to
    ``AutoProcessor.from_pretrained``.
    """
    from transformers import AutoProcessor
    from transformers.processing_utils import ProcessorMixin

    if not is_multimodal_model(name_or_path, bool(kwargs.get("trust_remote_code", False))):
        return None
    from verl.utils.processor_compat import allow_image_only_processors

    allow_image_only_processors()
    processor = AutoProcessor.from_pretrained(name_or_path, **kwargs)
    if not isinstance(processor, ProcessorMixin):
        raise ValueError(
            f"{name_or_path}: the model has a vision tower but AutoProcessor gave a {type(processor).__name__}; "
            "the folder needs the processor files (preprocessor_config.json, chat template)"
        )
    if processor.tokenizer.pad_token_id is None:
        processor.tokenizer.pad_token = processor.tokenizer.eos_token
    return processor
