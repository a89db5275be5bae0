"""Bad reward-model settings fail at validation, before Ray or any model starts, naming every key and the fix."""

from __future__ import annotations

import pytest

from verl.trainer.config.loader import load_config
from verl.trainer.config.validation import ConfigError

RM = ["reward_model.enable=True", "reward_model.model.path=models/rm"]
JUDGE = ["reward_model.enable=True", "reward_model.use_reward_loop=True", "reward_model.model.path=default"]


def _errors(overrides: list[str]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(overrides)
    return info.value.errors


def test_valid_reward_model_and_judge_configs_load():
    config = load_config(RM + ["reward_model.micro_batch_size_per_gpu=4"])
    assert config.reward_model.model_source() == "model" and config.data.return_raw_chat  # follows enable
    assert config.reward_model.model.input_tokenizer == config.actor_rollout_ref.model.path
    config = load_config(JUDGE + ["+reward_model.combine.weights={rule: 1.0, judge: 0.5}"])
    assert config.reward_model.source_weights() == {"rule": 1.0, "judge": 0.5}
    assert config.reward_model.sources_for("anything") == ["rule", "judge"]
    assert not load_config([]).data.return_raw_chat


def test_reward_model_needs_a_path_and_a_micro_batch_size():
    errors = _errors(["reward_model.enable=True", "reward_model.use_dynamic_bsz=False"])
    assert any("reward_model.enable=True needs reward_model.model.path" in e for e in errors)
    assert any("reward_model.micro_batch_size_per_gpu is null" in e and "use_dynamic_bsz" in e for e in errors)


def test_rerendering_needs_the_raw_chat():
    (error,) = _errors(RM + ["reward_model.micro_batch_size_per_gpu=4", "data.return_raw_chat=False"])
    assert "reward_model.model.input_tokenizer=" in error and "data.return_raw_chat=True" in error
    assert "input_tokenizer=null" in error


def test_dynamic_batch_budget_must_hold_a_sequence_without_rerendering():
    overrides = RM + ["reward_model.model.input_tokenizer=null", "reward_model.use_dynamic_bsz=True"]
    (error,) = _errors(overrides + ["reward_model.forward_max_token_len_per_gpu=100"])
    assert "reward_model.forward_max_token_len_per_gpu=100 is below one full sequence" in error


def test_own_pool_needs_its_size():
    (error,) = _errors(RM + ["reward_model.micro_batch_size=2", "reward_model.enable_resource_pool=True"])
    assert "reward_model.enable_resource_pool=True needs reward_model.n_gpus_per_node > 0" in error


def test_deprecated_global_micro_batch_size_is_divided_by_the_world():
    config = load_config(RM + ["reward_model.micro_batch_size=4", "trainer.n_gpus_per_node=2"])
    assert config.reward_model.micro_batch_size_per_gpu == 2


def test_judge_settings():
    errors = _errors(
        JUDGE
        + [
            "reward_model.judge.prompt_template='Rate {answer}'",
            "reward_model.judge.parser=regex",
            "reward_model.judge.max_score=0",
            "reward_model.rollout.tensor_model_parallel_size=2",
        ]
    )
    text = "\n".join(errors)
    assert "uses the placeholder {answer}" in text and "has no {response} placeholder" in text
    assert (
        "reward_model.judge.parser='regex' is not a registered judgment parser; registered: boxed, last_number" in text
    )
    assert "reward_model.judge.max_score=0.0 must exceed reward_model.judge.min_score=0.0" in text
    assert "reward_model.rollout.tensor_model_parallel_size=2" in text and "num_workers" in text


def test_judge_engine_must_be_registered_for_the_judge():
    # sglang is a registered rollout engine, but no judge engine registers it
    errors = _errors(JUDGE + ["reward_model.rollout.name=sglang"])
    assert any(
        "reward_model.rollout.name='sglang' is not a registered judge engine; registered: hf, vllm" in e for e in errors
    )
    assert load_config(JUDGE + ["reward_model.rollout.name=hf"]).reward_model.rollout.name == "hf"


def test_judge_engine_without_its_package_fails_at_validation():
    from verl.workers.reward_model.judge.engines import JUDGE_ENGINE_REGISTRY, HFJudgeEngine, register_judge_engine

    class PluginEngine(HFJudgeEngine):
        """A user engine, registered at run time as a plugin would be, needing a package that is not installed."""

    register_judge_engine("plugin", requires="verl_no_such_package")(PluginEngine)
    try:
        errors = _errors(JUDGE + ["reward_model.rollout.name=plugin"])
    finally:
        JUDGE_ENGINE_REGISTRY.pop("plugin")
    assert any("reward_model.rollout.name='plugin' needs the 'verl_no_such_package' package" in e for e in errors)
    assert JUDGE_ENGINE_REGISTRY.info("vllm") == {"requires": "vllm"}


def test_combine_names_sources_that_run():
    errors = _errors(JUDGE + ["+reward_model.combine.weights={rule: 1.0, model: 1.0, human: 2.0}"])
    text = "\n".join(errors)
    assert "reward_model.combine.weights.human names the reward source 'human'; sources: rule, model, judge" in text
    assert "reward_model.combine.weights.model uses the 'model' source, which runs only with" in text
    assert "reward_model.combine never uses the 'judge' source" in text
    errors = _errors(["+reward_model.combine.data_sources={gsm8k: []}"])
    assert "reward_model.combine.data_sources.gsm8k=[] must be a non-empty list" in errors[0]


def test_a_missing_local_reward_model_folder_is_named():
    errors = _errors(["reward_model.enable=True", "reward_model.model.path=/no/such/rm"])
    assert any("reward_model.model.path='/no/such/rm' is not a folder" in e for e in errors)


def test_reward_model_strategy_names_a_registered_engine():
    config = load_config(RM + ["reward_model.micro_batch_size_per_gpu=4", "reward_model.strategy=megatron"])
    assert config.reward_model.strategy == "megatron"
    errors = _errors(RM + ["reward_model.micro_batch_size_per_gpu=4", "reward_model.strategy=deepspeed"])
    assert any("reward_model.strategy='deepspeed'" in e and "fsdp, fsdp2, megatron" in e for e in errors)
