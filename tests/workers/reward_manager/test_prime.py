"""The prime manager survives scorers that hang, raise, crash or return garbage, and scores the rest."""

import os
import time

import torch

from tests.workers.reward_manager.batch_builder import expected_tensor, make_batch
from verl.workers.reward_manager import PrimeRewardManager


def unreliable_score(data_source, solution_str, ground_truth, extra_info=None):
    """Behaviour chosen by the response text."""
    if "sleep" in solution_str:
        time.sleep(10_000)
    if "raise" in solution_str:
        raise RuntimeError("scorer bug")
    if "exit" in solution_str:
        os._exit(3)  # the worker process dies
    if "nan" in solution_str:
        return float("nan")
    if "text" in solution_str:
        return "not a number"
    if "dict" in solution_str:
        return {"score": 0.5, "acc": 1.0}
    return float(solution_str.strip() == ground_truth)


def test_prime_survives_hanging_and_raising_scorers(tokenizer):
    responses = ["7", "sleep", "raise", "8", "exit", "nan", "text", "dict", "sleep"]
    data, lengths = make_batch(tokenizer, responses, ["7"] * len(responses))
    scoring = {"num_processes": 2, "timeout": 1.0, "on_error": "fallback"}
    manager = PrimeRewardManager(tokenizer, 0, compute_score=unreliable_score, scoring=scoring)
    try:
        result = manager(data, return_dict=True)
        torch.testing.assert_close(result["reward_tensor"], expected_tensor([1.0, 0, 0, 0.0, 0, 0, 0, 0.5, 0], lengths))
        info = result["reward_extra_info"]
        assert info["score_timeout"] == [0, 1, 0, 0, 0, 0, 0, 0, 1]
        assert info["score_error"] == [0, 0, 1, 0, 1, 0, 0, 0, 0]
        assert info["score_invalid"] == [0, 0, 0, 0, 0, 1, 1, 0, 0]
        # failed samples count as 0; a sample whose function returned a plain number has no 'acc' (None)
        assert info["acc"] == [None, 0.0, 0.0, None, 0.0, 0.0, 0.0, 1.0, 0.0]
        assert manager.last_failure_counts == {"score_timeout": 2, "score_error": 2, "score_invalid": 2}
        assert result["reward_metrics"] == {"reward/timeouts": 2.0, "reward/errors": 4.0}

        # The pool replaced the killed workers: a second batch scores normally.
        data, lengths = make_batch(tokenizer, ["7", "6"], ["7", "7"])
        torch.testing.assert_close(manager(data), expected_tensor([1.0, 0.0], lengths))
        assert manager.last_failure_counts == {"score_timeout": 0, "score_error": 0, "score_invalid": 0}
    finally:
        manager.close()
    assert manager.scorer.pool.workers == []


def test_prime_default_scores_match_naive(tokenizer):
    data, lengths = make_batch(tokenizer, ["#### 72", "#### 71", "72"], ["72", "72", "72"])
    manager = PrimeRewardManager(tokenizer, 0, scoring={"num_processes": 2})
    try:
        torch.testing.assert_close(manager(data), expected_tensor([1.0, 0.0, 0.0], lengths))
    finally:
        manager.close()


def test_prime_manager_pickles_without_its_processes(tokenizer):
    """Sent to another process (as a Ray task would), the copy starts its own workers."""
    import pickle

    manager = PrimeRewardManager(tokenizer, 0, scoring={"num_processes": 1})
    try:
        data, lengths = make_batch(tokenizer, ["#### 72"], ["72"])
        manager(data)
        copy = pickle.loads(pickle.dumps(manager))
        assert copy.scorer.pool.workers == [] and len(manager.scorer.pool.workers) == 1
        torch.testing.assert_close(copy(data), expected_tensor([1.0], lengths))
        copy.close()
    finally:
        manager.close()
