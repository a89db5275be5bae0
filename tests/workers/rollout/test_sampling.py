"""Sampling settings: config values, per-batch meta_info overrides, validation and greedy precedence."""

import pytest

from tests.workers.rollout.helpers import rollout_config
from verl.workers.config.rollout import SamplingConfig
from verl.workers.rollout.sampling import resolve_sampling, resolve_special_ids


def _resolve(config, meta_info):
    return resolve_sampling(config, meta_info, eos_token_ids=(2,), pad_token_id=2)


def test_config_values_and_meta_info_overrides():
    config = rollout_config("hf", n=4, temperature=0.7, top_p=0.9, top_k=20, response_length=32)
    base = _resolve(config, {})
    assert (base.n, base.temperature, base.top_p, base.top_k, base.response_length) == (4, 0.7, 0.9, 20, 32)
    override = _resolve(config, {"n": 2, "temperature": 1.3, "top_p": 0.5, "top_k": 5, "response_length": 4})
    assert (override.n, override.temperature, override.top_p, override.top_k, override.response_length) == (
        2,
        1.3,
        0.5,
        5,
        4,
    )


def test_do_sample_false_is_greedy_with_one_sample():
    settings = _resolve(rollout_config("hf", n=4, temperature=0.7), {"do_sample": False})
    assert settings.greedy and settings.n == 1 and settings.top_k == -1 and settings.top_p == 1.0


def test_validate_uses_val_kwargs():
    val = SamplingConfig(temperature=0.5, top_p=0.8, top_k=3, n=5, do_sample=True)
    settings = _resolve(rollout_config("hf", n=4, temperature=1.0, val_kwargs=val), {"validate": True})
    # one sample per row: the trainer repeats validation prompts val_kwargs.n times itself
    assert (settings.n, settings.temperature, settings.top_p, settings.top_k) == (1, 0.5, 0.8, 3)
    greedy_val = SamplingConfig(temperature=0.9, n=1, do_sample=False)
    assert _resolve(rollout_config("hf", val_kwargs=greedy_val), {"validate": True}).greedy


@pytest.mark.parametrize("bad", [{"n": 0}, {"top_p": 0.0}, {"temperature": -1.0}, {"response_length": 0}])
def test_bad_values_fail_naming_the_key(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        _resolve(rollout_config("hf"), bad)


def test_special_ids_precedence():
    class Tok:
        eos_token_id = 2
        pad_token_id = None

    assert resolve_special_ids({"eos_token_id": [5, 6], "pad_token_id": 0}, Tok()) == ((5, 6), 0)
    assert resolve_special_ids({}, Tok(), generation_eos=[7, 2]) == ((7, 2), 7)
    assert resolve_special_ids({}, Tok()) == ((2,), 2)


def test_vision_placeholder_bias_covers_image_and_video_ids_only():
    from types import SimpleNamespace

    from verl.workers.rollout.sampling import PLACEHOLDER_BIAS, vision_placeholder_bias

    vlm_config = SimpleNamespace(image_token_id=151655, video_token_id=151656, vision_start_token_id=151652)
    assert vision_placeholder_bias(vlm_config) == {151655: PLACEHOLDER_BIAS, 151656: PLACEHOLDER_BIAS}
    assert vision_placeholder_bias(SimpleNamespace(vocab_size=49152)) == {}
