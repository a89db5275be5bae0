"""Every error quoted in ``docs/faq.md`` is what the current code prints.

``console`` blocks are ``main_ppo`` command lines: the test runs the same checks the CLI runs before Ray starts
(override check, composition, validation) and expects each ``  - `` line of the block among the reported problems
and no other. ``text`` blocks are runtime errors: each is matched against the exception one of the reproductions
below raises, and every block must be reproduced. In both, ``...`` in the FAQ stands for any text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from verl.trainer.config.loader import ConfigError, check_overrides, compose_config, normalize_overrides
from verl.trainer.main_ppo import prepare_config
from verl.trainer.ppo.checkpointing import step_of
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.utils.dataset.row_reading import check_row, read_rows
from verl.utils.reward_score import get_scorer
from verl.workers.reward_manager.abstract import split_score

FAQ = Path(__file__).resolve().parents[2] / "docs" / "faq.md"
COMMAND = "$ python -m verl.trainer.main_ppo "
_BLOCK = re.compile(r"^```(console|text)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks(kind: str) -> list[str]:
    return [body for found_kind, body in _BLOCK.findall(FAQ.read_text(encoding="utf-8")) if found_kind == kind]


def _config_error(overrides: list[str]) -> str:
    """What ``python -m verl.trainer.main_ppo <overrides>`` reports before starting anything (see ``cli``)."""
    try:
        overrides = normalize_overrides(overrides)
        check_overrides(overrides)
        prepare_config(compose_config(overrides))
    except ConfigError as exc:
        return str(exc)
    raise AssertionError(f"main_ppo {' '.join(overrides)} was accepted; the FAQ says it fails")


CONSOLE_BLOCKS = _blocks("console")


@pytest.mark.parametrize("block", CONSOLE_BLOCKS, ids=[b.splitlines()[0][len(COMMAND) :] for b in CONSOLE_BLOCKS])
def test_config_error_is_what_main_ppo_reports(block):
    lines = block.splitlines()
    assert lines[0].startswith(COMMAND) and lines[1] == "Invalid config:", block
    reported = _config_error(shlex.split(lines[0][len(COMMAND) :])).splitlines()
    expected = lines[2:]
    assert expected and all(line.startswith("  - ") for line in expected), block
    problems = [line for line in reported if line.startswith("  - ")]
    assert len(expected) == len(problems), reported
    for line in expected:
        assert any(_pattern(line).fullmatch(problem) for problem in problems), (line, reported)


def _raised(action: Callable[[], object]) -> str:
    try:
        action()
    except Exception as exc:  # noqa: BLE001 - the FAQ quotes the type and the message of whatever is raised
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError(f"{action} raised nothing")


def _reproductions(tmp_path: Path) -> list[str]:
    """The runtime errors a user can cause, each raised by the function that reads the user's input."""
    reward_file = tmp_path / "my_reward.py"
    reward_file.write_text("def score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n")

    def reward_config(path: Path) -> object:
        return OmegaConf.create({"custom_reward_function": {"path": str(path), "name": "compute_score"}})

    row_without_prompt = {"data_source": "openai/gsm8k", "reward_model": {"ground_truth": "4"}}
    return [
        _raised(lambda: read_rows("/data/gsm8k/train.parquet")),
        _raised(lambda: check_row(row_without_prompt, "/data/train.jsonl", 0, "prompt", "data_source")),
        _raised(lambda: get_custom_reward_fn(reward_config(tmp_path / "missing" / "my_reward.py"))),
        _raised(lambda: get_custom_reward_fn(reward_config(reward_file))),
        _raised(lambda: split_score({"acc": 1.0})),
        _raised(lambda: get_scorer("my_task")),
        _raised(lambda: step_of("/ckpt/run1")),
    ]


def _pattern(quoted: str) -> re.Pattern:
    return re.compile(".*".join(re.escape(part) for part in quoted.split("...")), re.DOTALL)


def test_every_runtime_error_in_the_faq_is_reproduced(tmp_path):
    raised = _reproductions(tmp_path)
    quoted = [block.strip() for block in _blocks("text")]
    assert len(quoted) == len(raised)
    for block in quoted:
        assert any(_pattern(block).fullmatch(message) for message in raised), (block, raised)
    for message in raised:
        assert any(_pattern(block).fullmatch(message) for block in quoted), f"not in the FAQ: {message}"
