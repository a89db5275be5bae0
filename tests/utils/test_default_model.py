"""The embedded default model loads with no network and answers a question sensibly."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from verl.utils.default_model import DEFAULT_MODEL_NAME, cache_dir, default_model_path

REPO_ROOT = Path(__file__).resolve().parents[2]

GENERATE = textwrap.dedent(
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl.utils.default_model import default_model_path

    path = default_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    output = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    print("RESPONSE:" + tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))
    """
)


def test_default_model_is_a_cached_hf_folder():
    path = Path(default_model_path())
    assert path == cache_dir() / "models" / DEFAULT_MODEL_NAME
    assert (path / "config.json").is_file() and list(path.glob("*.safetensors"))
    assert default_model_path() == str(path)  # second call: no reconversion


def test_default_model_generates_offline():
    """A fresh interpreter with the hub switched off; SmolLM2-135M-Instruct knows this one (greedy)."""
    default_model_path()  # converted before the offline run, as `make install` / first use does
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(
        [sys.executable, "-c", GENERATE], env=env, capture_output=True, text=True, timeout=600, cwd=REPO_ROOT
    )
    assert result.returncode == 0, result.stderr[-2000:]
    response = result.stdout.split("RESPONSE:", 1)[1]
    assert "Paris" in response
