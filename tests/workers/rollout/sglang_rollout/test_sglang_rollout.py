"""SGLang's per-batch sampling parameters (SGLang has no CPU build here: the engine itself runs in the GPU tests)."""

from transformers import AutoConfig

from tests.support.models import tiny_model_path, tiny_vlm_path
from verl.workers.rollout.sampling import PLACEHOLDER_BIAS, SamplingSettings
from verl.workers.rollout.sglang_rollout.sglang_rollout import sglang_sampling_params

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
