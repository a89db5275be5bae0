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
    "megatron.expert_tensor_parallel_size": "null and 1 both mean dense experts (no MoE in the Megatron engine yet)",
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
