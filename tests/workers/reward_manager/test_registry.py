"""The reward-manager registry: built-in names, custom registration, and the error for unknown names."""

import pytest

from verl.workers.reward_manager import (
    BatchRewardManager,
    DAPORewardManager,
    NaiveRewardManager,
    PrimeRewardManager,
    get_reward_manager_cls,
    register,
)


def test_builtin_managers_are_registered():
    assert get_reward_manager_cls("naive") is NaiveRewardManager
    assert get_reward_manager_cls("batch") is BatchRewardManager
    assert get_reward_manager_cls("dapo") is DAPORewardManager
    assert get_reward_manager_cls("prime") is PrimeRewardManager


def test_unknown_name_lists_registered_ones():
    with pytest.raises(ValueError, match=r"reward_model.reward_manager.*'batch', 'dapo', 'naive', 'prime'"):
        get_reward_manager_cls("does-not-exist")


@pytest.fixture
def scratch_registry():
    """The registry as it was before the test: a name registered here must not reach later tests (the config
    reference lists every registered manager)."""
    from verl.workers.reward_manager.registry import REWARD_MANAGER_REGISTRY

    entries, info = dict(REWARD_MANAGER_REGISTRY._entries), dict(REWARD_MANAGER_REGISTRY._info)
    yield
    REWARD_MANAGER_REGISTRY._entries.clear()
    REWARD_MANAGER_REGISTRY._entries.update(entries)
    REWARD_MANAGER_REGISTRY._info.clear()
    REWARD_MANAGER_REGISTRY._info.update(info)


def test_custom_manager_registers_by_name(scratch_registry):
    @register("test_constant")
    class ConstantRewardManager:
        def __init__(self, tokenizer, num_examine, compute_score=None, reward_fn_key="data_source"):
            pass

    assert get_reward_manager_cls("test_constant") is ConstantRewardManager
    register("test_constant")(ConstantRewardManager)  # registering the same class again is harmless
    with pytest.raises(ValueError, match="already registered"):
        register("test_constant")(type("Other", (), {}))
