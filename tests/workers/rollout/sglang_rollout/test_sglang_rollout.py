"""SGLang's per-batch sampling parameters and the environment its engine is launched in (SGLang has no CPU build
here: the engine itself runs in the GPU tests)."""

import os
import subprocess
import sys

from transformers import AutoConfig

from tests.support.models import tiny_model_path, tiny_vlm_path
from verl.workers.rollout.sampling import PLACEHOLDER_BIAS, SamplingSettings
from verl.workers.rollout.sglang_rollout.sglang_rollout import _launch_env, sglang_sampling_params

SETTINGS = SamplingSettings(
    n=2, temperature=0.7, top_p=0.9, top_k=0, response_length=16, eos_token_ids=(2, 7), pad_token_id=2
)


def test_a_vision_language_model_bans_its_placeholders_by_string_keyed_logit_bias():
    config = AutoConfig.from_pretrained(tiny_vlm_path("qwen2_vl"))
    params = sglang_sampling_params(SETTINGS, False, config)
    # SGLang's SamplingParams.logit_bias is Dict[str, float]: it reads each key with int(key) into a logits row
    assert params["logit_bias"] == {str(config.image_token_id): PLACEHOLDER_BIAS, str(config.video_token_id): -100.0}
    assert params["max_new_tokens"] == 16 and params["top_k"] == -1 and params["stop_token_ids"] == [2, 7]


def test_a_text_model_gets_no_logit_bias_and_ignore_eos_drops_the_stops():
    config = AutoConfig.from_pretrained(tiny_model_path())
    params = sglang_sampling_params(SETTINGS, True, config)
    assert "logit_bias" not in params
    assert params["ignore_eos"] is True and params["stop_token_ids"] == []


def test_the_engine_launch_leaves_every_actor_ranks_nccl_settings_as_they_were(monkeypatch):
    # SGLang 0.5.16's Engine sets these in the process that builds it (sglang.srt.entrypoints.engine,
    # _set_envs_and_config); at TP=2 only the group's first rank builds one, so kept they would differ between the
    # actor's ranks, and the actor's first NCCL all-gather failed (session 28, two H200s)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.delenv("NCCL_CUMEM_ENABLE", raising=False)
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    before = dict(os.environ)
    with _launch_env("0,1"):
        seen = subprocess.run(
            [sys.executable, "-c", "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        os.environ["NCCL_CUMEM_ENABLE"] = "0"  # what the engine does
        os.environ["NCCL_NVLS_ENABLE"] = "0"
        os.environ["NCCL_DEBUG"] = "INFO"
        os.environ["SGLANG_RUN_ID"] = "kept"  # not NCCL's: the engine may read it later in this process
    assert seen == "0,1"  # the schedulers start on the group's GPUs
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert "NCCL_CUMEM_ENABLE" not in os.environ and "NCCL_NVLS_ENABLE" not in os.environ
    assert os.environ["NCCL_DEBUG"] == "WARN"
    assert os.environ.pop("SGLANG_RUN_ID") == "kept"
    assert dict(os.environ) == before
