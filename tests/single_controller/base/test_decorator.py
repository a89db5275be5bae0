"""``@register`` bookkeeping and the dispatch-mode registry (no Ray needed)."""

import pickle

import pytest

from verl.single_controller.base.decorator import (
    MAGIC_ATTR,
    Dispatch,
    Execute,
    collect_all_to_all,
    dispatch_one_to_all,
    get_predefined_dispatch_fn,
    register,
    register_dispatch_mode,
    update_dispatch_mode,
)


def test_predefined_modes_have_verl_names():
    for name in ("ONE_TO_ALL", "ALL_TO_ALL", "RANK_ZERO", "DP_COMPUTE", "DP_COMPUTE_PROTO"):
        assert name in Dispatch and get_predefined_dispatch_fn(Dispatch[name])
    assert {"DP_COMPUTE_PROTO_WITH_FUNC", "DP_COMPUTE_METRIC"} <= {mode.name for mode in Dispatch}
    assert [mode.name for mode in Execute] == ["ALL", "RANK_ZERO"]


def test_members_survive_pickling_even_where_unregistered():
    assert pickle.loads(pickle.dumps(Dispatch.DP_COMPUTE_PROTO)) is Dispatch.DP_COMPUTE_PROTO
    mode = register_dispatch_mode("TEST_PICKLED_MODE", dispatch_one_to_all, collect_all_to_all)
    payload = pickle.dumps(mode)
    Dispatch.remove("TEST_PICKLED_MODE")  # as in a worker process that never imported the registration
    restored = pickle.loads(payload)
    assert restored.name == "TEST_PICKLED_MODE" and restored is Dispatch.TEST_PICKLED_MODE


def test_register_records_modes_and_rejects_bad_ones():
    @register(dispatch_mode=Dispatch.DP_COMPUTE_PROTO, blocking=False)
    def compute(data):
        return data

    assert getattr(compute, MAGIC_ATTR) == {
        "dispatch_mode": Dispatch.DP_COMPUTE_PROTO,
        "execute_mode": Execute.ALL,
        "blocking": False,
    }
    assert compute(3) == 3
    with pytest.raises(TypeError, match="dispatch_mode must be a Dispatch member"):
        register(dispatch_mode="ONE_TO_ALL")
    with pytest.raises(ValueError, match="collect_fn"):
        register(dispatch_mode={"dispatch_fn": dispatch_one_to_all})
    with pytest.raises(TypeError, match="execute_mode"):
        register(execute_mode="ALL")


def test_user_dispatch_modes_register_and_update():
    mode = register_dispatch_mode("TEST_USER_MODE", dispatch_one_to_all, collect_all_to_all)
    assert get_predefined_dispatch_fn(mode)["collect_fn"] is collect_all_to_all
    with pytest.raises(ValueError, match="already exists"):
        register_dispatch_mode("TEST_USER_MODE", dispatch_one_to_all, collect_all_to_all)

    def first_only(worker_group, output):
        return output[0]

    update_dispatch_mode(mode, dispatch_one_to_all, first_only)
    assert get_predefined_dispatch_fn(mode)["collect_fn"] is first_only
    with pytest.raises(KeyError, match="TEST_MISSING"):
        Dispatch["TEST_MISSING"]
