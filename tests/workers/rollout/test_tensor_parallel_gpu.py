"""Tensor parallel on GPUs for both engines: a TP=2 engine spread over two worker processes (torchrun, nccl)
generates the same greedy output as a TP=1 engine from the same weights. Needs 2 GPUs (``nvidia-h100-x2``)."""

import json
import os
import subprocess
import sys

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.rollout.helpers import PROMPTS, load_model, load_tokenizer, train_toward
from verl.utils.distributed import free_port

pytestmark = pytest.mark.gpu


def _run(model_dir, out_dir, engine: str, nproc: int) -> list[list[int]]:
    """``nproc`` ranks of ``tp_worker``, one process each, on a static local rendezvous (no torchrun agent: on the
    H200 hosts of sessions 6 and 7 the torchrun-launched run printed nothing for 200 s)."""
    out_dir.mkdir()
    command = [
        sys.executable,
        "-m",
        "tests.workers.rollout.vllm_rollout.tp_worker",
        str(model_dir),
        str(out_dir),
        engine,
    ]
    port = str(free_port())
    # the engines' output goes to the test's own (pytest -s on the device): a run cut by the call's time limit
    # still shows how far each rank got; a rank that hangs prints its stacks every TP_WORKER_STACKS_AFTER_S
    print(f"[tp test] {engine} TP={nproc} on 127.0.0.1:{port}: {' '.join(command)}", flush=True)
    ranks = []
    for rank in range(nproc):
        env = dict(
            os.environ,
            VLLM_ENABLE_V1_MULTIPROCESSING="0",
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(nproc),
            LOCAL_WORLD_SIZE=str(nproc),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
        )
        env.setdefault("TP_WORKER_STACKS_AFTER_S", "90")
        ranks.append(subprocess.Popen(command, env=env))
    try:
        codes = [process.wait(timeout=900) for process in ranks]
    finally:
        for process in ranks:
            if process.poll() is None:
                process.kill()
    assert codes == [0] * nproc, f"{engine} TP={nproc} ranks exited with {codes}; their output is above"
    results = [json.loads((out_dir / f"rank{rank}.json").read_text()) for rank in range(nproc)]
    assert all(rank["tp_size"] == nproc for rank in results)
    return [row for rank in results for row in rank["responses"]]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_tp2_greedy_matches_tp1(engine, tmp_path):
    pytest.importorskip(engine)
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    path = tiny_model_path("llama", hidden_size=256)  # 4 query / 2 KV heads of dim 64: both split over 2 ranks
    tokenizer = load_tokenizer(path)
    model = load_model(path)
    train_toward(model, tokenizer, PROMPTS, " one two three four five six seven eight nine ten", steps=25)
    model_dir = tmp_path / "model"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    tp1 = _run(model_dir, tmp_path / "tp1", engine, 1)
    tp2 = _run(model_dir, tmp_path / "tp2", engine, 2)
    print(f"{engine}: TP=1 {tp1}\nTP=2 {tp2}")
    assert tp2 == tp1
