"""Scoring processes never outlive the trainer and leave Ctrl-C to it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from tests.support.files import process_alive as _alive
from verl.workers.reward_manager.scoring_pool import ScoringPool


def test_a_hanging_scorer_ends_when_its_trainer_is_killed(tmp_path):
    pid_file = tmp_path / "scorer.pid"
    script = textwrap.dedent(
        f"""
        import os, time
        from verl.workers.reward_manager.scoring_pool import ScoringPool

        def hang(**kwargs):
            open({str(pid_file)!r}, "w").write(str(os.getpid()))
            time.sleep(10_000)

        ScoringPool(hang, num_processes=1, timeout=1000).score([{{}}])
        """
    )
    trainer = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and trainer.poll() is None, "the scorer never started"
            time.sleep(0.1)
        scorer_pid = int(pid_file.read_text())
        trainer.send_signal(signal.SIGKILL)
        trainer.wait()
        deadline = time.monotonic() + 10
        while _alive(scorer_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(scorer_pid), "the orphaned scorer process is still running"
    finally:
        trainer.kill()


def _sleep_then_pid(seconds):
    time.sleep(seconds)
    return os.getpid()


def test_sigint_does_not_interrupt_a_running_call():
    """Ctrl-C in a terminal signals the whole process group; the trainer, not the scorer, decides what stops."""
    import threading

    pool = ScoringPool(_sleep_then_pid, num_processes=1, timeout=30)
    try:
        (warm,) = pool.score([{"seconds": 0.0}])
        interrupt = threading.Timer(0.3, os.kill, (warm.value, signal.SIGINT))
        interrupt.start()
        (outcome,) = pool.score([{"seconds": 1.0}])  # SIGINT arrives mid-call
        interrupt.join()
        assert (outcome.status, outcome.value) == ("ok", warm.value)
    finally:
        pool.close()
