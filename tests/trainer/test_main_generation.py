"""``main_generation`` then ``main_eval`` on a handful of GSM8K test prompts (``hf`` rollout, CPU).

The model is the tiny random Llama with SmolLM2's tokenizer: SmolLM2-135M solves almost no GSM8K problem
either, and generating with it costs minutes on the CI machine; the scoring of correct answers is covered with
hand-labelled responses in ``test_main_eval.py``. Greedy decoding makes the expected text computable here:
every one of a row's ``n`` responses must equal Hugging Face ``generate`` (greedy, one unpadded prompt at a
time). The evaluation report is then checked
against a recount: each response's ``#### <number>`` is extracted with a plain regex and compared with
the ground truth, and pass@k is counted by enumerating k-subsets.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.support.models import tiny_model_path
from verl.trainer.config.generation import EvaluationConfig, GenerationConfig
from verl.trainer.config.loader import CONFIG_DIR, _compose
from verl.trainer.config.sft import validate_typed
from verl.trainer.main_eval import run_eval

REPO_ROOT = Path(__file__).resolve().parents[2]
GSM8K_DIR = REPO_ROOT.parent / "shared" / "data" / "gsm8k"
NUM_PROMPTS, N_SAMPLES, RESPONSE_LENGTH = 4, 2, 16


@pytest.fixture(scope="module")
def gsm8k_test_parquet(tmp_path_factory) -> Path:
    if not (GSM8K_DIR / "test.jsonl").exists():
        pytest.skip(f"GSM8K not found at {GSM8K_DIR}")
    out = tmp_path_factory.mktemp("gsm8k")
    subprocess.run(
        [sys.executable, "examples/data_preprocess/gsm8k.py", "--local_dataset_path", str(GSM8K_DIR),
         "--local_save_dir", str(out), "--max_samples", str(NUM_PROMPTS)],
        cwd=REPO_ROOT, check=True, capture_output=True,
    )  # fmt: skip
    return out / "test.parquet"


def hf_greedy(model_path: str, prompts: list[list[dict]], max_new_tokens: int) -> list[str]:
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    texts = []
    for messages in prompts:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = model.generate(
                ids, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )  # fmt: skip
        texts.append(tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True))
    return texts


def recount_correct(response: str, ground_truth: str) -> bool:
    match = re.findall(r"####\s*\$?\s*(-?[0-9][0-9,]*\.?[0-9]*)", response)
    return bool(match) and float(match[-1].replace(",", "").rstrip(".")) == float(ground_truth)


def test_generate_then_evaluate(tmp_path, gsm8k_test_parquet):
    output = tmp_path / "gen.parquet"
    command = [
        sys.executable, "-m", "verl.trainer.main_generation",
        f"data.path={gsm8k_test_parquet}", f"data.output_path={output}", f"data.n_samples={N_SAMPLES}",
        "data.batch_size=3", f"model.path={tiny_model_path('llama')}", "rollout.name=hf", "rollout.do_sample=false",
        "rollout.prompt_length=256", f"rollout.response_length={RESPONSE_LENGTH}", "trainer.device=cpu",
    ]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="2", TOKENIZERS_PARALLELISM="false")
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]

    rows = pq.read_table(output).to_pylist()
    source_rows = pq.read_table(gsm8k_test_parquet).to_pylist()
    assert len(rows) == NUM_PROMPTS
    assert [row["prompt"] for row in rows] == [row["prompt"] for row in source_rows]  # input columns kept
    expected = hf_greedy(tiny_model_path("llama"), [row["prompt"] for row in rows], RESPONSE_LENGTH)
    for row, text in zip(rows, expected, strict=True):
        assert row["responses"] == [text] * N_SAMPLES

    report = run_eval(_compose(str(CONFIG_DIR), "evaluation", [f"data.path={output}"]))
    labels = [[recount_correct(r, row["reward_model"]["ground_truth"]) for r in row["responses"]] for row in rows]
    mean = sum(sum(ls) / len(ls) for ls in labels) / len(labels)
    pass_2 = sum(sum(map(any, combinations(ls, 2))) / len(list(combinations(ls, 2))) for ls in labels) / len(labels)
    pass_1 = mean  # every response scores 0 or 1
    assert report["openai/gsm8k"] == pytest.approx(
        {"num_prompts": NUM_PROMPTS, "n": N_SAMPLES, f"mean@{N_SAMPLES}": mean, "pass@1": pass_1, "pass@2": pass_2}
    )
    assert (tmp_path / "gen_eval.json").exists()


def module_overrides(script: str, module: str) -> list[str]:
    """``key=value`` arguments of the script's ``-m <module>`` command, shell variables given sample values."""
    text = script.replace("\\\n", " ")
    line = next(line for line in text.splitlines() if f"-m {module}" in line)
    args = shlex.split(line.split(f"-m {module}", 1)[1])
    values = {
        "$HOME": "/home/user",
        "$output_path": "/tmp/out.parquet",
        "$model_path": "default",
        "$save_path": "/ckpt",
    }
    out = []
    for arg in args:
        for name, value in values.items():
            arg = arg.replace(name, value)
        if "=" in arg and not arg.startswith("$"):
            out.append(arg)
    return out


@pytest.mark.parametrize("module,config_name,schema", [
    ("verl.trainer.main_generation", "generation", GenerationConfig),
    ("verl.trainer.main_eval", "evaluation", EvaluationConfig),
])  # fmt: skip
def test_generation_example_composes(module, config_name, schema):
    script = (REPO_ROOT / "examples" / "generation" / "run_smollm2_gsm8k_gen.sh").read_text()
    overrides = module_overrides(script, module)
    assert overrides
    validate_typed(_compose(str(CONFIG_DIR), config_name, overrides), schema)
