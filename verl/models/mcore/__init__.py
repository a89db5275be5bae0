"""Hugging Face models on megatron-core: config and weight conversion, the model builder and its attention.

Supported families (``SUPPORTED_ARCHITECTURES``): Llama (SmolLM2, Llama 2/3) and Qwen2, as causal LMs or as
value models (``*ForTokenClassification`` with one label). Importing this package does not import megatron-core.
"""

from verl.models.mcore.config_converter import SUPPORTED_ARCHITECTURES, hf_to_mcore_config_kwargs

__all__ = ["SUPPORTED_ARCHITECTURES", "hf_to_mcore_config_kwargs"]
