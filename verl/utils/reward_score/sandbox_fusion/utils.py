"""Calls to a SandboxFusion server (``POST <url>`` with ``{code, stdin, language, compile_timeout, run_timeout,
memory_limit_MB}``; the reply has ``status`` Success / Failed / SandboxError and ``run_result`` /
``compile_result`` with ``status``, ``stdout``, ``stderr``, ``return_code``).

Per-test results follow verl: True (right output), False (wrong output), -1 API or sandbox error, -2 runtime
error, -3 timeout, -4 compile error.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

DEFAULT_TIMEOUT = 10
MAX_RETRIES = 3
API_TIMEOUT = 10
SUPPORTED_LANGUAGES = ("python", "cpp", "nodejs", "go", "java", "php", "csharp", "bash", "typescript", "rust", "ruby")


def call_sandbox_api(
    sandbox_fusion_url: str,
    code: str,
    stdin: str,
    compile_timeout: int,
    run_timeout: int,
    memory_limit_mb: int = 1024,
    language: str = "python",
) -> tuple[dict | None, str | None]:
    """``(response json, None)`` or ``(None, error)``; a 504 gateway timeout is retried with a growing delay."""
    if language not in SUPPORTED_LANGUAGES:
        return None, f"unsupported language {language!r}; supported: {', '.join(SUPPORTED_LANGUAGES)}"
    payload = {
        "compile_timeout": compile_timeout,
        "run_timeout": run_timeout,
        "memory_limit_MB": memory_limit_mb,
        "code": code,
        "stdin": stdin,
        "language": language,
        "files": {},
        "fetch_files": [],
    }
    request = urllib.request.Request(
        sandbox_fusion_url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    error = "no attempt made"
    for attempt in range(MAX_RETRIES):
        try:
            with urllib.request.urlopen(request, timeout=compile_timeout + run_timeout + API_TIMEOUT) as reply:
                return json.loads(reply.read().decode()), None
        except urllib.error.HTTPError as exc:
            error = f"sandbox API HTTP {exc.code} at {sandbox_fusion_url}"
            if exc.code != 504:
                break
            time.sleep(attempt + 1)
        except (urllib.error.URLError, TimeoutError, json.JSONDecodeError) as exc:
            error = f"sandbox API error at {sandbox_fusion_url}: {exc}"
            break
    return None, error


def _case_status(response: dict | None, error: str | None, expected: Any) -> tuple[bool | int, str]:
    if error is not None or response is None:
        return -1, "api_error"
    status, run, compiled = response.get("status"), response.get("run_result") or {}, response.get("compile_result")
    if status == "Success" and run.get("status") == "Finished":
        right = str(run.get("stdout") or "").rstrip("\n") == str(expected).rstrip("\n")
        return right, "success" if right else "wrong_answer"
    if status == "Failed":
        if compiled and (compiled.get("status") in ("Error", "TimeLimitExceeded") or compiled.get("return_code")):
            return -4, "compile_error"
        if run.get("status") == "TimeLimitExceeded":
            return -3, "timeout"
        if run:
            return -2, "runtime_error"
    return -1, "sandbox_error"


def check_correctness(
    sandbox_fusion_url: str,
    in_outs: dict | None,
    generation: str,
    timeout: int = DEFAULT_TIMEOUT,
    memory_limit_mb: int = 1024,
    language: str = "python",
    concurrent_semaphore: threading.Semaphore | None = None,
) -> tuple[list[bool | int], list[dict[str, Any]]]:
    """Run ``generation`` on every input of ``in_outs`` (``{"inputs", "outputs"}``) in the sandbox, concurrently;
    returns per-test results (see the module docstring) and metadata, in input order."""
    if not in_outs or "inputs" not in in_outs or "outputs" not in in_outs:
        return [-1], [{"error": "test cases need 'inputs' and 'outputs'"}]
    inputs, outputs = in_outs["inputs"], in_outs["outputs"]
    if len(inputs) != len(outputs):
        return [-1] * len(inputs), [{"error": "inputs and outputs differ in length"}] * len(inputs)

    def one(index: int) -> tuple[bool | int, dict[str, Any]]:
        call = lambda: call_sandbox_api(  # noqa: E731
            sandbox_fusion_url, generation, str(inputs[index]), timeout, timeout, memory_limit_mb, language
        )
        if concurrent_semaphore is not None:
            with concurrent_semaphore:
                response, error = call()
        else:
            response, error = call()
        result, status = _case_status(response, error, outputs[index])
        return result, {"case_index": index, "status": status, "api_request_error": error, "api_response": response}

    if not inputs:
        return [], []
    with ThreadPoolExecutor(max_workers=min(len(inputs), 8)) as pool:
        done = list(pool.map(one, range(len(inputs))))
    return [r for r, _ in done], [m for _, m in done]
