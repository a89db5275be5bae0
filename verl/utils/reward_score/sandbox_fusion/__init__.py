"""Code rewards through a SandboxFusion server (``reward_model.sandbox_fusion.url``): the response's last code
block runs remotely on every test case (:func:`utils.check_correctness`)."""

from __future__ import annotations

import threading
from typing import Any

from verl.utils.reward_score.code_runner import extract_code, parse_test_cases
from verl.utils.reward_score.sandbox_fusion.utils import check_correctness

__all__ = ["check_correctness", "compute_score", "shared_semaphore"]

_SEMAPHORES: dict[int, threading.Semaphore] = {}
_LOCK = threading.Lock()


def shared_semaphore(max_concurrent: int) -> threading.Semaphore:
    """One semaphore per process and limit: a picklable config (an int) maps to the same throttle everywhere."""
    with _LOCK:
        return _SEMAPHORES.setdefault(max_concurrent, threading.Semaphore(max_concurrent))


def compute_score(
    sandbox_fusion_url: str,
    concurrent_semaphore: threading.Semaphore | int | None,
    memory_limit_mb: int,
    completion: str,
    test_cases: Any,
    continuous: bool = False,
    timeout: int = 10,
) -> tuple[float, list[dict[str, Any]]]:
    """``(score, metadata)``: 1.0 when every test passes (the fraction passed when ``continuous``), 0.0 on malformed
    test cases."""
    if isinstance(concurrent_semaphore, int):
        concurrent_semaphore = shared_semaphore(concurrent_semaphore)
    try:
        cases = parse_test_cases(test_cases)
    except (ValueError, TypeError) as exc:
        return 0.0, [{"error": str(exc)}]
    results, metadata = check_correctness(
        sandbox_fusion_url,
        cases,
        extract_code(completion),
        timeout=timeout,
        memory_limit_mb=memory_limit_mb,
        concurrent_semaphore=concurrent_semaphore,
    )
    if not results:
        return 0.0, metadata
    passed = sum(result is True for result in results)
    return (passed / len(results) if continuous else float(passed == len(results))), metadata
