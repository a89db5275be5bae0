"""``rollout.engine_kwargs.<backend>`` checks: unknown names fail naming the nearest engine argument."""

import pytest

from verl.workers.config.rollout import RolloutConfig
from verl.workers.rollout.engine_kwargs import backend_kwargs, check_kwarg_names


def test_backend_kwargs_drops_nulls_and_missing_backends():
    config = RolloutConfig(engine_kwargs={"vllm": {"swap_space": 4, "seed": None}, "sglang": None})
    assert backend_kwargs(config, "vllm") == {"swap_space": 4}
    assert backend_kwargs(config, "sglang") == {}
    assert backend_kwargs(config, "hf") == {}


def test_unknown_names_are_listed_with_the_nearest_valid_one():
    known = {"mem_fraction_static", "max_running_requests", "tp_size"}
    check_kwarg_names({"tp_size": 2}, known, "sglang", "ServerArgs")
    with pytest.raises(ValueError) as info:
        check_kwarg_names({"mem_fraction": 0.5, "zzz": 1}, known, "sglang", "ServerArgs")
    message = str(info.value)
    assert "engine_kwargs.sglang.mem_fraction is not an argument of ServerArgs; did you mean 'mem_fraction_static'" in (
        message
    )
    assert "engine_kwargs.sglang.zzz is not an argument of ServerArgs" in message
