"""verl's reward_score modules against hand-worked cases: prime_math, geo3k, Search-R1 QA EM, prime_code (local
bounded subprocesses), sandbox_fusion (a local HTTP server standing in for SandboxFusion), and the routing of
default_compute_score."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from verl.utils.reward_score import (
    default_compute_score,
    geo3k,
    prime_code,
    prime_math,
    sandbox_fusion,
    search_r1_like_qa_em,
)
from verl.utils.reward_score.code_runner import extract_code, run_program

ADD_PROGRAM = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
TESTS = {"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]}


def test_prime_math_boxed_and_unboxed_answers():
    assert prime_math.compute_score("so the total is \\boxed{\\frac{1}{2}}", "0.5") == (True, True, "\\frac{1}{2}")
    assert prime_math.compute_score("The answer is 12.", "\\boxed{12}") == (True, False, "12")
    correct, form, extracted = prime_math.compute_score("I think it is 7", "8")
    assert (correct, form, extracted) == (False, False, "7")
    assert default_compute_score("numina_olympiads", "\\boxed{3}", "3") == 1.0


def test_geo3k_format_and_accuracy():
    answer = "<think>angles sum to 180</think> The angle is \\boxed{60}"
    assert geo3k.compute_score(answer, "60") == pytest.approx(0.9 * 1 + 0.1 * 1)
    assert geo3k.compute_score("The angle is \\boxed{60}", "60") == pytest.approx(0.9)  # no think block
    assert geo3k.compute_score("<think>x</think> \\boxed{45}", "60") == pytest.approx(0.1)
    assert default_compute_score("hiyouga/geometry3k", answer, "60") == pytest.approx(1.0)


def test_search_r1_exact_match():
    truth = {"target": ["The Eiffel Tower", "Eiffel tower"]}
    assert search_r1_like_qa_em.compute_score("<answer> eiffel Tower! </answer>", truth) == 1.0
    assert search_r1_like_qa_em.compute_score("<answer>Louvre</answer>", truth) == 0.0
    assert search_r1_like_qa_em.compute_score("no tags", truth) == 0
    spammed = "<answer>x</answer>" * 11 + "<answer>Eiffel Tower</answer>"
    assert search_r1_like_qa_em.compute_score(spammed, truth) == 0.25
    assert search_r1_like_qa_em.compute_score_subem("<answer>the eiffel tower in paris</answer>", truth) == 1.0
    assert default_compute_score("searchR1_nq", "<answer>Eiffel Tower</answer>", truth) == 1.0


def test_code_extraction_and_bounded_run():
    assert extract_code("text\n```python\nprint(1)\n```\nmore ```py\nprint(2)\n```") == "print(2)\n"
    assert run_program("import time\ntime.sleep(5)", "", timeout=0.5)["status"] == "timeout"
    big = run_program("x = bytearray(400 * 1024 * 1024)", "", timeout=10, memory_limit_mb=128)
    assert big["status"] == "error" and "MemoryError" in big["stderr"]
    leaked = run_program("import os; print(os.environ.get('SECRET_TOKEN'))", "", timeout=10)
    assert leaked["stdout"].strip() == "None"


def test_prime_code_stdin_and_call_based(monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "x")
    score, meta = prime_code.compute_score(ADD_PROGRAM, json.dumps(TESTS))
    assert score == 1.0 and [m["passed"] for m in meta] == [True, True]
    wrong = "```python\na, b = map(int, input().split())\nprint(a * b)\n```"
    assert prime_code.compute_score(wrong, TESTS)[0] == 0.0
    assert prime_code.compute_score(wrong, TESTS, continuous=True)[0] == 0.0  # 1*2 != 3 and 10*-3 != 7
    call_based = {"fn_name": "add", "inputs": [[1, 2], [5, 5]], "outputs": [[3], [11]]}
    score, meta = prime_code.compute_score("def add(a, b):\n    return a + b", call_based, continuous=True)
    assert score == 0.5 and [m["passed"] for m in meta] == [True, False]
    assert prime_code.compute_score(ADD_PROGRAM, {"inputs": ["1"]})[0] == 0.0  # malformed test cases
    assert default_compute_score("apps", ADD_PROGRAM, json.dumps(TESTS)) == 1.0


class _FakeSandbox(BaseHTTPRequestHandler):
    """Runs the posted python code locally and answers in SandboxFusion's format."""

    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        done = subprocess.run([sys.executable, "-c", body["code"]], input=body["stdin"], capture_output=True, text=True)
        run = {"status": "Finished", "stdout": done.stdout, "stderr": done.stderr, "return_code": done.returncode}
        reply = {"status": "Success" if done.returncode == 0 else "Failed", "run_result": run, "compile_result": None}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def sandbox_url():
    server = HTTPServer(("127.0.0.1", 0), _FakeSandbox)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _FakeSandbox.requests = []
    yield f"http://127.0.0.1:{server.server_address[1]}/run_code"
    server.shutdown()


def test_sandbox_fusion_calls_the_server(sandbox_url):
    score, meta = sandbox_fusion.compute_score(sandbox_url, 2, 256, ADD_PROGRAM, json.dumps(TESTS))
    assert score == 1.0 and [m["status"] for m in meta] == ["success", "success"]
    sent = _FakeSandbox.requests[0]
    assert sent["language"] == "python" and sent["memory_limit_MB"] == 256 and "print(a + b)" in sent["code"]
    crash = "```python\nraise SystemExit(3)\n```"
    results, meta = sandbox_fusion.check_correctness(sandbox_url, TESTS, extract_code(crash))
    assert results == [-2, -2] and meta[0]["status"] == "runtime_error"
    assert default_compute_score("codecontests", ADD_PROGRAM, TESTS, sandbox_fusion_url=sandbox_url) == 1.0


def test_sandbox_unreachable_is_an_api_error():
    results, meta = sandbox_fusion.check_correctness("http://127.0.0.1:9/run_code", TESTS, "print(1)")
    assert results == [-1, -1] and meta[0]["status"] == "api_error"
