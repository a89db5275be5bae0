"""The code sandbox: each rule broken ends in an error message within the limits, and normal code runs.

Every case runs real Python in the sandbox (unshare/rlimits/audit hook as this machine allows). Wall-clock
assertions allow for a loaded machine: the limit plus start-up and kill time.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest

from verl.tools.code_executor_tool import CodeExecutorTool
from verl.tools.utils.sandbox import SandboxLimits, run_python

LIMITS = SandboxLimits(timeout_s=4.0, cpu_time_s=3, memory_mb=256, max_output_bytes=512, max_processes=8)
SLACK_S = 20.0  # process start-up and teardown on a loaded 2-core machine


def run(code: str, limits: SandboxLimits = LIMITS):
    start = time.perf_counter()
    result = asyncio.run(run_python(code, limits))
    return result, time.perf_counter() - start


def test_normal_code_runs_and_prints():
    result, _ = run("import math\nprint(math.factorial(10))")
    assert result.ok and result.stdout.strip() == "3628800"


def test_infinite_loop_is_stopped():
    result, elapsed = run("while True:\n    pass")
    assert not result.ok
    assert elapsed < LIMITS.timeout_s + SLACK_S
    assert "Error:" in result.message(LIMITS)  # wall-clock timeout or CPU limit, whichever comes first


def test_sleeping_forever_is_stopped_by_the_wall_clock():
    result, elapsed = run("import time\ntime.sleep(1000)")
    assert result.timed_out and elapsed < LIMITS.timeout_s + SLACK_S
    assert f"longer than {LIMITS.timeout_s:g} s" in result.message(LIMITS)


def test_fork_bomb_is_contained():
    code = "import os\nwhile True:\n    os.fork()"
    result, elapsed = run(code)
    assert not result.ok and elapsed < LIMITS.timeout_s + SLACK_S
    assert "BlockingIOError" in result.message(LIMITS) or result.timed_out


def test_one_gigabyte_allocation_fails():
    result, _ = run("block = bytearray(1 << 30)\nprint('allocated')")
    assert not result.ok
    assert "MemoryError" in result.message(LIMITS)
    assert "allocated" not in result.stdout


def test_write_outside_the_temporary_directory_is_refused(tmp_path):
    target = f"/tmp/verl-sandbox-escape-{uuid.uuid4().hex}"
    result, _ = run(f"open({target!r}, 'w').write('x')")
    assert not result.ok and "PermissionError" in result.message(LIMITS)
    assert not os.path.exists(target)
    inside, _ = run("open('notes.txt', 'w').write('kept')\nprint(open('notes.txt').read())")
    assert inside.ok and inside.stdout.strip() == "kept"


def test_network_and_other_programs_are_refused():
    result, _ = run("import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)")
    assert not result.ok and ("network access is not allowed" in result.stderr or "Error" in result.stderr)
    result, _ = run("import subprocess\nsubprocess.run(['true'])")
    assert not result.ok and "subprocess.Popen is not allowed" in result.stderr


def test_output_is_truncated():
    result, _ = run("print('x' * 10000)")
    assert result.ok and result.output_truncated
    assert len(result.stdout) == LIMITS.max_output_bytes
    assert "[output truncated to 512 bytes]" in result.message(LIMITS)


def test_tool_turns_failures_into_messages():
    tool = CodeExecutorTool({"type": "native", "timeout_s": 3, "cpu_time_s": 2, "memory_mb": 256})

    async def call(code):
        instance_id, _ = await tool.create()
        response, _, metrics = await tool.execute(instance_id, {"code": code})
        return response.text, metrics

    text, metrics = asyncio.run(call("print(6 * 7)"))
    assert text == "42" and metrics["error"] == 0.0
    text, metrics = asyncio.run(call("raise ValueError('bad input')"))
    assert "ValueError: bad input" in text and metrics["error"] == 1.0
    text, _ = asyncio.run(call(""))
    assert text.startswith("Error: the call needs")


def test_tool_rejects_unknown_config_keys():
    with pytest.raises(ValueError, match="unknown keys \\['timeout'\\]"):
        CodeExecutorTool({"type": "native", "timeout": 3})
