"""A Ray cluster started once (``ray start --head``, as a user starts one before running on a cluster) that several
``main_ppo`` runs of the tests join, instead of each run starting and stopping a Ray of its own (about 10 s a run
on a 2-core machine). Runs that are killed or interrupted keep their own Ray: their tests end every process of the
run, and a joined cluster's processes are not the run's."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from verl.trainer.main_ppo import NO_IDLE_WORKERS

NUM_CPUS = 8
"""Logical CPUs of the shared cluster: the largest run's workers and its driver task (Megatron TP=2 with a reward
model needs 3), with room for a finished run's processes that Ray is still ending."""

NO_PRESTART_ENV = {f"RAY_{key}": str(int(value)) for key, value in NO_IDLE_WORKERS.items()}
"""``main_ppo``'s system config for a cluster it starts (:data:`verl.trainer.main_ppo.NO_IDLE_WORKERS`: no idle
workers started ahead of tasks) as the environment variables ``ray start`` reads."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RayCluster:
    """``ray start --head --block`` in a process group of its own; :attr:`address` is what ``$RAY_ADDRESS`` of a
    joining run names. :meth:`stop` ends every process of it (never ``ray stop``: that stops every Ray of the
    machine)."""

    def __init__(self, env: dict[str, str], cwd: Path, timeout: float = 120):
        self.address = f"127.0.0.1:{_free_port()}"
        self.tmpdir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # socket paths must stay under ~107 characters
        # Token authentication with a token of this cluster's own: `ray start` turns authentication on only when a
        # token already exists (~/.ray/auth_token, which a plain ray.init() creates), so on a machine where none has
        # run yet the cluster would start without it and every joining run (which asks for it) would be refused.
        token_path = Path(self.tmpdir) / "auth_token"
        token_path.write_text(secrets.token_hex(32))
        self.auth_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_path)}
        command = [
            str(Path(sys.executable).parent / "ray"),
            "start",
            "--head",
            "--block",
            f"--port={self.address.rsplit(':', 1)[1]}",
            f"--num-cpus={NUM_CPUS}",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={self.tmpdir}",
        ]
        self.proc = subprocess.Popen(
            command,
            cwd=cwd,
            env={**env, **NO_PRESTART_ENV, **self.auth_env, "RAY_TMPDIR": self.tmpdir},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._wait_until_started(timeout)

    def _wait_until_started(self, timeout: float) -> None:
        """Read the CLI's output until it says the node runs (then keep draining it in a thread)."""
        lines: list[str] = []
        started = threading.Event()

        def read() -> None:
            for line in self.proc.stdout:
                lines.append(line)
                if "Ray runtime started" in line:
                    started.set()
            started.set()

        threading.Thread(target=read, daemon=True).start()
        if not started.wait(timeout) or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("ray start did not start:\n" + "".join(lines[-40:]))

    def env(self) -> dict[str, str]:
        """What a run's environment adds to join this cluster: its address, and its token authentication (off by
        default for a driver given an explicit address)."""
        return {"RAY_ADDRESS": self.address, **self.auth_env}

    def stop(self) -> None:
        """End the CLI and every process it started (GCS, raylet, workers), and wait until they are gone."""
        from tests.trainer.main_ppo_runner import kill_processes, run_processes

        processes = run_processes(self.proc.pid)
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        kill_processes(processes + run_processes(self.proc.pid))
