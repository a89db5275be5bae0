"""Shared utilities; ``hf_tokenizer`` and ``hf_processor`` load a model's tokenizer and multimodal processor."""

from verl.utils.tokenizer import hf_processor, hf_tokenizer

__all__ = ["hf_processor", "hf_tokenizer"]
