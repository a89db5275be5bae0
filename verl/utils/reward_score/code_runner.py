"""Run untrusted generated code against test cases in bounded subprocesses (the local half of code rewards).

Each test runs ``python -c <program>`` in a fresh process with a wall-clock ``timeout``, an address-space limit
(``memory_limit_mb``) and no inherited environment secrets; nothing runs in the trainer's process. Two test
formats (the APPS / PRIME convention): standard input/output (``{"inputs": [stdin...], "outputs": [stdout...]}``),
or a function call (``"fn_name"`` plus JSON argument lists and return values).
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
from typing import Any

_CODE_BLOCK = re.compile(r"```(?:python|py|python3)?\s*\n(.*?)```", re.DOTALL)
CALL_HARNESS = """
import json, sys
_args = json.loads(sys.stdin.read())
_result = {fn_name}(*_args)
sys.stdout.write(json.dumps(_result))
"""


def extract_code(completion: str) -> str:
    """The last fenced python block of ``completion`` (the whole text when there is none)."""
    blocks = _CODE_BLOCK.findall(completion)
    return blocks[-1] if blocks else completion


def parse_test_cases(test_cases: Any) -> dict:
    """``test_cases`` as a dict with ``inputs`` and ``outputs`` lists (a JSON string is decoded)."""
    cases = json.loads(test_cases) if isinstance(test_cases, str) else dict(test_cases)
    if "inputs" not in cases or "outputs" not in cases or len(cases["inputs"]) != len(cases["outputs"]):
        raise ValueError("test cases need 'inputs' and 'outputs' lists of the same length")
    return cases


def _limits(memory_limit_mb: int):
    def apply() -> None:
        limit = memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        os.setsid()

    return apply


def run_program(program: str, stdin: str, timeout: float, memory_limit_mb: int = 1024) -> dict[str, Any]:
    """Run ``program`` with ``stdin``; ``{"status": finished|timeout|error, "stdout", "stderr", "return_code"}``."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", program],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            preexec_fn=_limits(memory_limit_mb),
        )
    except subprocess.TimeoutExpired as exc:
        return {"status": "timeout", "stdout": exc.stdout or "", "stderr": exc.stderr or "", "return_code": None}
    status = "finished" if done.returncode == 0 else "error"
    return {"status": status, "stdout": done.stdout, "stderr": done.stderr, "return_code": done.returncode}


def _same_output(actual: str, expected: Any) -> bool:
    expected_text = expected if isinstance(expected, str) else "\n".join(map(str, expected))
    normalize = lambda text: [line.rstrip() for line in text.strip().splitlines()]  # noqa: E731
    return normalize(actual) == normalize(expected_text)


def _same_return(stdout: str, expected: Any) -> bool:
    """The JSON return value equals ``expected`` or, APPS-style, its single element."""
    try:
        result = json.loads(stdout)
    except json.JSONDecodeError:
        return False
    return result == expected or (isinstance(expected, list) and len(expected) == 1 and result == expected[0])


def run_test_cases(code: str, cases: dict, timeout: float = 10, memory_limit_mb: int = 1024) -> list[dict[str, Any]]:
    """One result per test: ``{"passed": bool, "status": ..., "stdout", "stderr"}`` (see the module docstring)."""
    fn_name = cases.get("fn_name")
    program = code + (CALL_HARNESS.format(fn_name=fn_name) if fn_name else "")
    results = []
    for stdin, expected in zip(cases["inputs"], cases["outputs"]):
        feed = json.dumps(stdin) if fn_name else stdin if isinstance(stdin, str) else "\n".join(map(str, stdin))
        run = run_program(program, feed, timeout, memory_limit_mb)
        if run["status"] != "finished":
            passed = False
        elif fn_name:
            passed = _same_return(run["stdout"], expected)
        else:
            passed = _same_output(run["stdout"], expected)
        results.append({"passed": passed, **run})
    return results


def score_results(results: list[dict[str, Any]], continuous: bool) -> float:
    """Fraction of passed tests when ``continuous``, else 1.0 only when every test passed."""
    if not results:
        return 0.0
    passed = sum(result["passed"] for result in results)
    return passed / len(results) if continuous else float(passed == len(results))
