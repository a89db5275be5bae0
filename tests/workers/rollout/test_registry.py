"""Rollout registry: built-in names resolve lazily, unknown names list the registered ones."""

import pytest

from verl.workers.rollout import BaseRollout, get_rollout_class, register_rollout
from verl.workers.rollout.registry import ROLLOUT_REGISTRY


def test_hf_resolves_to_hf_rollout():
    cls = get_rollout_class("hf")
    assert cls.__name__ == "HFRollout" and issubclass(cls, BaseRollout)


def test_unknown_name_lists_registered():
    with pytest.raises(ValueError, match=r"Unknown rollout 'tgi'.*'hf', 'sglang', 'vllm'"):
        get_rollout_class("tgi")


def test_tensorrt_llm_is_pinned_to_the_gpu_rollout_issue():
    """verl's ``rollout.name=trtllm`` names the feature and the issue that builds it."""
    assert "trtllm" not in ROLLOUT_REGISTRY.names()
    with pytest.raises(NotImplementedError, match=r"not supported yet: the TensorRT-LLM rollout \(issue 14\)"):
        get_rollout_class("trtllm")


def test_sglang_resolves_without_importing_sglang():
    import sys

    cls = get_rollout_class("sglang")
    assert cls.__name__ == "SGLangRollout" and issubclass(cls, BaseRollout)
    assert "sglang" not in sys.modules  # the engine is imported when a rollout is built


def test_register_custom_and_reject_duplicates():
    @register_rollout("test-echo")
    class Echo(BaseRollout):
        def generate_sequences(self, prompts):
            return prompts

        def make_sharding_manager(self, actor_module):
            return None

    try:
        assert get_rollout_class("test-echo") is Echo
        with pytest.raises(ValueError, match="already registered"):
            register_rollout("test-echo")(type("Other", (Echo,), {}))
    finally:
        ROLLOUT_REGISTRY.pop("test-echo")
