"""``rollout.engine_kwargs.<backend>`` checks: unknown names fail naming the nearest engine argument."""

import pytest

from verl.workers.config.rollout import RolloutConfig
from verl.workers.rollout.engine_kwargs import (
    backend_kwargs,
    check_kwarg_names,
    engine_kwargs_errors,
    static_dataclass_fields,
)


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


def test_argument_names_read_from_source_are_the_dataclass_fields():
    """The pre-Ray check reads vLLM's ``EngineArgs`` fields from source; importing it gives the same set."""
    pytest.importorskip("vllm")
    import dataclasses
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from verl.workers.rollout.engine_kwargs import static_dataclass_fields\n"
        "names = static_dataclass_fields('vllm', 'engine/arg_utils.py', 'EngineArgs')\n"
        "assert 'torch' not in sys.modules\n"
        "print(' '.join(sorted(names)))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    from vllm.engine.arg_utils import EngineArgs

    assert run.stdout.split() == sorted(f.name for f in dataclasses.fields(EngineArgs))
    assert static_dataclass_fields("no_such_engine_package", "x.py", "X") is None


def test_selected_engine_kwargs_are_checked_before_the_engine_starts():
    pytest.importorskip("vllm")
    config = RolloutConfig(
        name="vllm", engine_kwargs={"vllm": {"max_num_seqs": 8, "swap_spaces": 4}, "sglang": {"x": 1}}
    )
    errors = engine_kwargs_errors(config)  # the sglang entry is not the selected engine's: not checked
    assert len(errors) == 1
    assert errors[0].startswith("actor_rollout_ref.rollout.engine_kwargs.vllm.swap_spaces is not an argument of vllm")
    assert engine_kwargs_errors(RolloutConfig(name="hf", engine_kwargs={"hf": {"anything": 1}})) == []
