"""PRIME's code scorer (``codecontests``, ``apps``, ``codeforces``, ``taco``): run the response's last python block
against the row's test cases in bounded local subprocesses (:mod:`verl.utils.reward_score.code_runner`)."""

from __future__ import annotations

from typing import Any

from verl.utils.reward_score.code_runner import extract_code, parse_test_cases, run_test_cases, score_results

__all__ = ["compute_score"]


def compute_score(
    completion: str, test_cases: Any, continuous: bool = False, timeout: float = 10, memory_limit_mb: int = 1024
) -> tuple[float, list[dict[str, Any]]]:
    """``(score, per-test metadata)``: 1.0 when every test passes (fraction passed when ``continuous``); malformed
    test cases score 0.0 with the error in the metadata."""
    try:
        cases = parse_test_cases(test_cases)
    except (ValueError, TypeError) as exc:
        return 0.0, [{"error": str(exc)}]
    results = run_test_cases(extract_code(completion), cases, timeout, memory_limit_mb)
    return score_results(results, continuous), results
