"""``tests/conftest.py`` keeps the session's exit status through a crash in the interpreter's teardown (session 25's
CI: every test passed, then a segfault after the summary turned ``make test`` red)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# a module global whose finalizer kills the process with SIGSEGV when the interpreter clears the modules at exit,
# after every exit handler ran (the names it needs are bound as defaults: the module's globals are gone by then)
TEARDOWN_CRASH = """
import atexit
import os
import signal


class CrashOnTeardown:
    def __del__(self, kill=os.kill, pid=os.getpid(), sig=signal.SIGSEGV):
        kill(pid, sig)


KEEP = CrashOnTeardown()
atexit.register(lambda: open("exit_handler_ran", "w").close())  # a handler registered after the conftest's


def test_outcome():
    assert OUTCOME
"""


def _session(tmp_path: Path, outcome: bool, with_conftest: bool) -> int:
    (tmp_path / "test_teardown_crash.py").write_text(f"OUTCOME = {outcome}\n" + TEARDOWN_CRASH)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_teardown_crash.py"]
    if with_conftest:
        command[4:4] = ["-p", "tests.conftest"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("PYTHONFAULTHANDLER", None)
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=300).returncode


@pytest.mark.skipif(not hasattr(signal, "SIGSEGV") or sys.platform == "win32", reason="POSIX signals")
def test_the_crash_kills_a_session_without_the_conftest(tmp_path):
    assert _session(tmp_path, outcome=True, with_conftest=False) == -signal.SIGSEGV


@pytest.mark.parametrize("outcome, status", [(True, 0), (False, 1)])
def test_the_sessions_status_survives_the_crash_and_later_exit_handlers_still_run(tmp_path, outcome, status):
    assert _session(tmp_path, outcome=outcome, with_conftest=True) == status
    assert (tmp_path / "exit_handler_ran").exists()
