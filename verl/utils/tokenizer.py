"""Load a model's tokenizer (``hf_tokenizer``) and, for vision-language models, its processor (``hf_processor``)."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def hf_tokenizer(name_or_path: str, trust_remote_code: bool = False, **kwargs: Any):
    """``AutoTokenizer`` with a pad token (the EOS token when the tokenizer has none)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=trust_remote_code, **kwargs)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def is_multimodal_model(name_or_path: str, trust_remote_code: bool = False) -> bool:
    """True when the model's config has a vision tower (``vision_config``)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
    return getattr(config, "vision_config", None) is not None


def hf_processor(name_or_path: str, trust_remote_code: bool = False, **kwargs: Any):
    """The multimodal ``AutoProcessor`` of a vision-language model, or ``None`` for a text-only model.

    Like verl, a processor that is only a tokenizer (text models) gives ``None``, so callers branch on
    ``processor is not None``. Without torchvision the processor loads image-only
    (:mod:`verl.utils.processor_compat`).
    """
    from transformers import AutoProcessor
    from transformers.processing_utils import ProcessorMixin

    if not is_multimodal_model(name_or_path, trust_remote_code):
        return None
    from verl.utils.processor_compat import allow_image_only_processors

    allow_image_only_processors()
    processor = AutoProcessor.from_pretrained(name_or_path, trust_remote_code=trust_remote_code, **kwargs)
    if not isinstance(processor, ProcessorMixin):
        raise ValueError(
            f"{name_or_path}: the model has a vision tower but AutoProcessor gave a {type(processor).__name__}; "
            "the folder needs the processor files (preprocessor_config.json, chat template)"
        )
    if processor.tokenizer.pad_token_id is None:
        processor.tokenizer.pad_token = processor.tokenizer.eos_token
    return processor
