"""verl's ``verl.utils.hf_tokenizer`` / ``hf_processor``: load a Hugging Face tokenizer or multimodal processor."""

from __future__ import annotations

import logging

__all__ = ["hf_processor", "hf_tokenizer", "set_pad_token_id"]

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


def hf_tokenizer(name_or_path: str, correct_pad_token: bool = True, correct_gemma2: bool = True, **kwargs):
    """``AutoTokenizer.from_pretrained(name_or_path, **kwargs)`` with a pad token (``correct_pad_token``) and, for
    gemma-2-2b-it, ``<end_of_turn>`` as EOS (``correct_gemma2``)."""
    from transformers import AutoTokenizer

    if correct_gemma2 and isinstance(name_or_path, str) and GEMMA2_IT in name_or_path:
        logger.warning("gemma-2-2b-it: using <end_of_turn> (id 107) as the EOS token")
        kwargs.setdefault("eos_token", "<end_of_turn>")
        kwargs.setdefault("eos_token_id", 107)
    tokenizer = AutoTokenizer.from_pretrained(name_or_path, **kwargs)
    if correct_pad_token:
        set_pad_token_id(tokenizer)
    return tokenizer


def hf_processor(name_or_path: str, **kwargs):
    """The model's multimodal ``AutoProcessor``, or None for a text-only model (whose "processor" is just its
    tokenizer) or when none can be loaded."""
    from transformers import AutoProcessor

    try:
        processor = AutoProcessor.from_pretrained(name_or_path, **kwargs)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        logger.info("no processor for %s: %s", name_or_path, exc)
        return None
    if "Processor" not in type(processor).__name__:
        return None
    return processor
