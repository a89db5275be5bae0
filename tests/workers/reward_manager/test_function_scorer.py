"""Every reward manager survives reward functions that hang, raise, return NaN or return strings: under
``on_error=raise`` it stops with a message naming the function, the sample, its data source and input and what went
wrong; under ``on_error=fallback`` the failed samples score ``fallback_score`` and are counted in ``reward/timeouts``
and ``reward/errors``. The expected scores are written out by hand."""

from __future__ import annotations

import re
import time

import pytest
import torch

from tests.workers.reward_manager.batch_builder import expected_tensor, make_batch
from verl.workers.reward_manager import (
    BatchRewardManager,
    DAPORewardManager,
    NaiveRewardManager,
    PrimeRewardManager,
)
from verl.workers.reward_manager.function_scorer import RewardFunctionError

PER_SAMPLE_MANAGERS = [NaiveRewardManager, DAPORewardManager, PrimeRewardManager]
FAST = {"timeout": 1.0, "num_processes": 2}


def misbehaving_score(data_source, solution_str, ground_truth, extra_info=None):
    """Behaviour chosen by the response text: the cases of a user's reward function going wrong."""
    text = solution_str.strip()
    if text == "hang":
        time.sleep(10_000)
    if text == "raise":
        return 1 / 0
    if text == "nan":
        return float("nan")
    if text == "inf":
        return {"score": float("inf"), "acc": 1.0}
    if text == "numeric-string":
        return "1.0"
    if text == "word":
        return "correct"
    return {"score": float(text == ground_truth), "acc": float(text == ground_truth)}


def misbehaving_batch(data_sources, solution_strs, ground_truths, extra_infos):
    """A batch function: the first response picks how the whole call behaves."""
    first = solution_strs[0].strip()
    if first == "hang":
        time.sleep(10_000)
    if first == "raise":
        raise RuntimeError("verifier unreachable")
    if first == "short":
        return [1.0]
    return [misbehaving_score(s, r, g) for s, r, g in zip(data_sources, solution_strs, ground_truths)]


def _run(manager_cls, responses, scoring, compute_score=misbehaving_score, return_dict=True, tokenizer=None):
    data, lengths = make_batch(tokenizer, responses, ["7"] * len(responses), data_source="my_task")
    manager = manager_cls(tokenizer, 0, compute_score=compute_score, scoring=scoring)
    try:
        return manager(data, return_dict=return_dict), lengths
    finally:
        manager.close()


def _failure(manager_cls, tokenizer, responses) -> str:
    with pytest.raises(RewardFunctionError) as info:
        _run(manager_cls, responses, {**FAST, "on_error": "raise"}, tokenizer=tokenizer)
    return str(info.value)


FUNCTION = re.escape("misbehaving_score (") + r".*test_function_scorer\.py:\d+\)"


@pytest.mark.parametrize("manager_cls", PER_SAMPLE_MANAGERS, ids=lambda c: c.__name__)
def test_per_sample_failures_stop_the_run_naming_function_sample_and_value(tokenizer, manager_cls):
    started = time.monotonic()
    message = _failure(manager_cls, tokenizer, ["7", "hang"])
    # the call sleeps 10,000 s: ending within a minute (a loaded machine starts the pool slowly) shows the cut
    assert time.monotonic() - started < 60, "a hanging function must be stopped at the time limit"
    assert re.search(f"the reward function {FUNCTION} failed on sample 1 of 2 \\(data_source 'my_task'\\)", message)
    assert "no result within reward_model.scoring.timeout=1.0 s" in message
    stack = r'it was stopped at .*\n  File ".*test_function_scorer.py", line \d+ in misbehaving_score'
    assert re.search(stack, message)
    assert "solution_str='hang', ground_truth='7'" in message
    assert "reward_model.scoring.on_error=fallback" in message

    message = _failure(manager_cls, tokenizer, ["raise", "7"])
    assert "failed on sample 0 of 2" in message and "ZeroDivisionError: division by zero" in message
    assert "return 1 / 0" in message  # the user's line, from the traceback

    message = _failure(manager_cls, tokenizer, ["7", "7", "nan"])
    assert "failed on sample 2 of 3 (data_source 'my_task'): it returned nan;" in message
    assert "a reward must be a finite number (int, float, bool) or a dict with a finite numeric 'score'" in message

    message = _failure(manager_cls, tokenizer, ["inf"])
    assert "it returned a dict whose 'score' is inf" in message

    message = _failure(manager_cls, tokenizer, ["numeric-string", "word"])
    assert "failed on sample 0 of 2 (data_source 'my_task'): it returned the string '1.0'" in message
    assert "2 of 2 samples failed (timeouts 0, errors 0, non-reward results 2)" in message

    message = _failure(manager_cls, tokenizer, ["word"])
    assert "it returned the string 'correct'" in message


@pytest.mark.parametrize("manager_cls", PER_SAMPLE_MANAGERS, ids=lambda c: c.__name__)
def test_per_sample_failures_fall_back_and_are_counted(tokenizer, manager_cls, capsys):
    responses = ["7", "hang", "raise", "nan", "numeric-string", "word", "8", "inf"]
    scoring = {**FAST, "on_error": "fallback", "fallback_score": -1.0, "warn_ratio": 0.5}
    result, lengths = _run(manager_cls, responses, scoring, tokenizer=tokenizer)
    expected = [1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 0.0, -1.0]
    torch.testing.assert_close(result["reward_tensor"], expected_tensor(expected, lengths))
    assert result["reward_metrics"] == {"reward/timeouts": 1.0, "reward/errors": 5.0}
    assert result["reward_extra_info"]["acc"] == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert result["reward_extra_info"]["score"] == expected
    out = capsys.readouterr().out
    warning = f"WARNING: the reward function {FUNCTION} failed on 6 of 8 samples \\(timeouts 1, errors 5\\)"
    assert re.search(warning, out)
    assert "they score reward_model.scoring.fallback_score=-1.0" in out

    # below the warning share: counted, not printed; the pool replaced the killed process and scores again
    result, lengths = _run(manager_cls, ["7", "word", "7", "7"], scoring, tokenizer=tokenizer)
    torch.testing.assert_close(result["reward_tensor"], expected_tensor([1.0, -1.0, 1.0, 1.0], lengths))
    assert result["reward_metrics"] == {"reward/timeouts": 0.0, "reward/errors": 1.0}
    assert "WARNING" not in capsys.readouterr().out


def test_batch_manager_call_failures(tokenizer, capsys):
    def failure(responses):
        with pytest.raises(RewardFunctionError) as info:
            _run(BatchRewardManager, responses, {**FAST, "on_error": "raise"}, misbehaving_batch, tokenizer=tokenizer)
        return str(info.value)

    function = re.escape("misbehaving_batch (") + r".*test_function_scorer\.py:\d+\)"
    message = failure(["hang", "7", "7"])
    assert re.search(
        f"the reward function {function} failed on its call for a batch of 3 samples \\(data sources: my_task x3\\)",
        message,
    )
    assert "no result within reward_model.scoring.timeout=1.0 s" in message
    assert "RuntimeError: verifier unreachable" in failure(["raise", "7"])
    assert "it returned 1 results for a batch of 2 samples" in failure(["short", "7"])
    # one bad element names its own sample
    assert "failed on sample 1 of 2 (data_source 'my_task'): it returned nan" in failure(["7", "nan"])
    assert "it returned the string 'correct'" in failure(["7", "word"])

    scoring = {**FAST, "on_error": "fallback", "fallback_score": 0.5}
    result, lengths = _run(BatchRewardManager, ["hang", "7"], scoring, misbehaving_batch, tokenizer=tokenizer)
    torch.testing.assert_close(result["reward_tensor"], expected_tensor([0.5, 0.5], lengths))
    assert result["reward_metrics"] == {"reward/timeouts": 2.0, "reward/errors": 0.0}
    result, lengths = _run(BatchRewardManager, ["7", "nan", "8"], scoring, misbehaving_batch, tokenizer=tokenizer)
    torch.testing.assert_close(result["reward_tensor"], expected_tensor([1.0, 0.5, 0.0], lengths))
    assert result["reward_metrics"] == {"reward/timeouts": 0.0, "reward/errors": 1.0}
    assert "failed on 1 of 3 samples" in capsys.readouterr().out


def test_default_scoring_is_on_with_a_time_limit_and_raises(tokenizer):
    manager = NaiveRewardManager(tokenizer, 0)
    assert (manager.scorer.config.timeout, manager.scorer.config.on_error) == (300.0, "raise")
