"""``benchmarks/gpu/calls.sh``'s GRPO presets parse: every run and variant a preset names is known to
``bench_gpu_grpo``, and every verl run's overrides make a valid ``main_ppo`` config (checked where the engine is
installed). A preset's typo would otherwise first show on the GPU machine, after its install."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from benchmarks import bench_gpu_grpo
from tests.support.models import with_heads
from verl.trainer.config.loader import compose_config
from verl.trainer.main_ppo import prepare_config

CALLS = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "calls.sh"


def grpo_presets() -> dict[str, list[str]]:
    """Preset name -> the arguments its ``grpo NAME LIMIT ARGS...`` line passes to the benchmark."""
    text = CALLS.read_text().replace("\\\n", " ")
    for name, value in re.findall(r"^([A-Z_]+)=(\S+)$", text, re.MULTILINE):  # the script's constants, expanded
        text = text.replace(f'"${name}"', value)
    presets = {}
    for match in re.finditer(r"^\s*([\w|]+)\) grpo (\S+) \d+ (.*?) ;;", text, re.MULTILINE):
        presets[match.group(1)] = shlex.split(match.group(3))
    return presets


def test_the_presets_are_found():
    presets = grpo_presets()
    assert {"warm", "table", "ratioctx", "trl", "loop2", "loop2dp"} <= presets.keys()
    assert presets["loop2"][-2:] == [
        "--variant",
        "tp2=trainer.n_gpus_per_node=2,actor_rollout_ref.rollout.tensor_model_parallel_size=2",
    ]


@pytest.mark.parametrize("preset", sorted(grpo_presets()))
def test_a_grpo_preset_parses_and_its_runs_make_valid_configs(preset, tmp_path):
    # the built-in arithmetic data stands in for the GSM8K parquet the device call carries (a later override wins)
    data = ["--override", "data.train_files=arithmetic", "--override", "data.val_files=arithmetic"]
    args, _, runs = bench_gpu_grpo.parse_args(["--out", str(tmp_path), *data, *grpo_presets()[preset]])
    # the heads the run's model declares: SmolLM2's 9 / 3, or those --random-model sets (the TP check reads them)
    fields = {"num_attention_heads": 9, "num_key_value_heads": 3, **args.random_fields}
    args.model = with_heads(tmp_path / "model", fields["num_attention_heads"], fields["num_key_value_heads"])
    for name in runs:
        engine, variant = bench_gpu_grpo.split_run(name)
        if engine not in bench_gpu_grpo.VERL_ENGINES:  # bare engines and TRL take no main_ppo config
            continue
        overrides = [o for o in bench_gpu_grpo.workload_overrides(args, engine, variant) if o != "trainer.device=cuda"]
        config = compose_config(overrides)  # unknown or misspelled keys fail here
        if engine == "hf" or importlib.util.find_spec(engine) is not None:
            config = prepare_config(config)  # the checks main_ppo runs before Ray starts
        for override in overrides:
            key, _, value = override.partition("=")
            if key == "trainer.n_gpus_per_node":
                assert config.trainer.n_gpus_per_node == int(value), name


def test_every_module_a_preset_runs_exists():
    # python3 -m benchmarks.X in a preset: a renamed or misspelled module would first fail on the GPU machine
    modules = set(re.findall(r"python3 -m ([\w.]+)", CALLS.read_text())) - {"pytest"}
    assert {"benchmarks.bench_gpu_grpo", "benchmarks.gpu.nccl_transport", "benchmarks.bench_weight_gather"} <= modules
    assert [m for m in sorted(modules) if importlib.util.find_spec(m) is None] == []


def update_presets() -> dict[str, list[str]]:
    """Preset name -> the arguments of its ``python3 -m benchmarks.bench_gpu_update`` command."""
    text = CALLS.read_text().replace("\\\n", " ")
    pattern = r"^\s*([\w|]+)\) PYTHONPATH=\S+ item \S+ \d+ python3 -m benchmarks\.bench_gpu_update (.*?) ;;"
    return {m.group(1): shlex.split(m.group(2)) for m in re.finditer(pattern, text, re.MULTILINE)}


def _option_values(args: list[str], option: str) -> list[str]:
    """The values after ``option`` up to the next ``--`` option."""
    if option not in args:
        return []
    rest = args[args.index(option) + 1 :]
    return rest[: next((i for i, a in enumerate(rest) if a.startswith("--")), len(rest))]


def test_every_update_preset_names_known_shapes_and_variants():
    """A variant name in an update preset that ``bench_gpu_update`` does not know would fail only on the GPU."""
    from benchmarks import bench_gpu_update

    presets = update_presets()
    assert {"update15", "keep15", "keep15c", "keep15u"} <= presets.keys()
    for name, args in presets.items():
        for variant in _option_values(args, "--variants"):
            assert variant in bench_gpu_update.VARIANTS, (name, variant)
        for shape in _option_values(args, "--shapes"):
            assert shape in bench_gpu_update.SHAPES, (name, shape)
