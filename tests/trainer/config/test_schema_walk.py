"""No key is accepted and ignored: every schema field is read by some code, pinned to planned work, or constant."""

from __future__ import annotations

from pathlib import Path

import pytest

import verl
from verl.trainer.config.generation import EvaluationConfig, GenerationConfig
from verl.trainer.config.root import PPOConfig
from verl.trainer.config.schema_walk import leaf_fields, unread_fields
from verl.trainer.config.sft import SFTConfig

PACKAGE = Path(verl.__file__).parent

EQUIVALENT_CHOICES = {
    "trainer.use_legacy_worker_impl": "every allowed value selects this build's one worker implementation",
    "megatron.use_mbridge": "both values convert weights with this build's own HF <-> megatron-core converter",
    "megatron.vanilla_mbridge": "both bridges verl can pick are replaced by this build's own converter",
    "fsdp_config.use_orig_params": "FSDP2 always shards the module's own parameters; the flag only changes FSDP1",
}
"""Fields (matched by path suffix) whose allowed values all mean the same behaviour here (anything else fails
validation)."""


def _equivalent(path: str) -> bool:
    return any(path == key or path.endswith("." + key) for key in EQUIVALENT_CHOICES)


@pytest.mark.parametrize("root", [PPOConfig, SFTConfig, GenerationConfig, EvaluationConfig], ids=lambda c: c.__name__)
def test_every_field_is_read_pinned_or_constant(root):
    unread = [path for path in unread_fields(root, PACKAGE, set()) if not _equivalent(path)]
    assert unread == [], f"fields no code reads (implement them or pin them in verl/trainer/config/pins.py): {unread}"


def test_the_walk_finds_an_ignored_field(tmp_path):
    """The walk is not vacuous: a field no file reads is reported, a pinned one is not."""
    from dataclasses import dataclass

    from verl.workers.config.base import BaseConfig, pinned_field

    @dataclass
    class Toy(BaseConfig):
        used_by_code: int = 1
        nobody_reads_this: int = 2
        planned: bool = pinned_field(False, (False,), "a planned feature", 99)

    (tmp_path / "user.py").write_text("def f(cfg):\n    return cfg.used_by_code\n")
    assert unread_fields(Toy, tmp_path, set()) == ["nobody_reads_this"]
    assert [path for path, _ in leaf_fields(Toy)] == ["used_by_code", "nobody_reads_this", "planned"]


NOT_CONFIG_OBJECTS = {
    ("verl/workers/engine/megatron/grads.py", "sequence_parallel"): "a torch parameter megatron-core may tag",
    ("verl/workers/engine/megatron/optim.py", "optim"): "megatron-core's optimizer wrapper",
    ("verl/workers/reward_manager/from_config.py", "source"): "a reward source object, not a config",
    ("verl/workers/reward_manager/from_config.py", "judge"): "a reward source object, not a config",
    ("verl/workers/reward_model/role.py", "chat_template"): "a Hugging Face tokenizer",
}
"""``getattr(obj, "<name>", default)`` calls whose ``<name>`` is also a config field but whose ``obj`` is not a
config (so a default there restates nothing)."""


def _config_field_names() -> set[str]:
    names = set()
    for root in (PPOConfig, SFTConfig, GenerationConfig, EvaluationConfig):
        for path, _ in leaf_fields(root):
            names.update(path.split("."))
    return names


def _getattr_fallbacks(package: Path, names: set[str]) -> list[tuple[str, str]]:
    """``(file relative to the package's parent, name)`` of every three-argument ``getattr(obj, "name", default)``
    whose name is in ``names``."""
    import ast

    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) == 3
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in names
            ):
                found.append((path.relative_to(package.parent).as_posix(), node.args[1].value))
    return found


def test_no_getattr_fallback_restates_a_config_default():
    """Components read their typed config directly: ``getattr(config, "data_loader_seed", 0)`` would be a second
    default (the dataclass says 1) that silently wins when the config is not the typed one."""
    fallbacks = [hit for hit in _getattr_fallbacks(PACKAGE, _config_field_names()) if hit not in NOT_CONFIG_OBJECTS]
    assert fallbacks == [], f"read these fields from the typed config instead of getattr with a default: {fallbacks}"


def test_the_getattr_scan_finds_a_fallback(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "worker.py").write_text(
        'def seed(config, hf_config):\n    return getattr(config, "data_loader_seed", 0), getattr(hf_config, "x", 1)\n'
    )
    assert _getattr_fallbacks(package, {"data_loader_seed"}) == [("pkg/worker.py", "data_loader_seed")]
