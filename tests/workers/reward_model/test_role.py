"""RewardModelRole on 2 gloo ranks: ``rm_scores`` equal a plain transformers ``AutoModelForSequenceClassification``
forward of each text alone, (1) on the policy's own tokens, (2) with a reward model whose tokenizer differs
(added tokens, another chat template): the chat re-rendered from the raw messages, (3) for a causal LM with a
TRL value head: the final hidden state times the head. Each score sits at the last valid response token.

Tolerance: a score is a float32 dot product over a 64-wide hidden state after two tiny layers; padded/packed
vs single-sequence attention reorders sums of ~50 terms of magnitude ~1, an error of a few 1e-6.
"""

from __future__ import annotations

import pytest
import torch

from tests.support.models import smollm2_path
from tests.workers.engine.fsdp.distributed import run_on_ranks
from tests.workers.reward_model.helpers import (
    CHATS,
    RESPONSES,
    chat_batch,
    expected_rm_scores,
    save_sequence_classifier,
    save_value_head_lm,
    sequence_classifier_score,
)

pytestmark = pytest.mark.slow

ATOL = 2e-5


def _score_on_rank(rank, world, configs, batch):
    from verl.workers.reward_model.role import RewardModelRole

    share = batch.chunk(world)[rank]
    results = {}
    for name, config in configs.items():
        output = RewardModelRole(config).compute_rm_score(share)
        results[name] = (output.batch["rm_scores"], output.meta_info["metrics"])
    return results


@pytest.fixture(scope="module")
def batch():
    return chat_batch()


@pytest.fixture(scope="module")
def scored(tmp_path_factory, batch):
    """Three reward models (paths) and their ``rm_scores`` over the batch, from one 2-rank run."""
    from verl.workers.config.reward_model import RewardModelConfig, RewardModelModelConfig

    paths = {
        "policy_tokens": save_sequence_classifier(tmp_path_factory.mktemp("rm")),
        "variant": save_sequence_classifier(tmp_path_factory.mktemp("rm_variant"), tokenizer_variant=True),
        "value_head": save_value_head_lm(tmp_path_factory.mktemp("vhead")),
    }
    configs = {
        "policy_tokens": RewardModelConfig(
            enable=True,
            model=RewardModelModelConfig(path=paths["policy_tokens"], input_tokenizer=None, use_remove_padding=True),
            micro_batch_size_per_gpu=1,
        ),
        "variant": RewardModelConfig(
            enable=True,
            model=RewardModelModelConfig(path=paths["variant"], input_tokenizer=smollm2_path()),
            use_dynamic_bsz=True,
            forward_max_token_len_per_gpu=80,
        ),
        "value_head": RewardModelConfig(
            enable=True,
            model=RewardModelModelConfig(path=paths["value_head"], input_tokenizer=None, use_remove_padding=True),
            micro_batch_size_per_gpu=2,
        ),
    }
    results = run_on_ranks(_score_on_rank, 2, configs, batch)
    return {name: (path, torch.cat([r[name][0] for r in results]), results[0][name][1]) for name, path in paths.items()}


def test_policy_tokens_scored_as_plain_transformers(scored, batch):
    from transformers import AutoModelForSequenceClassification

    path, rm_scores, metrics = scored["policy_tokens"]
    model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32)
    mask = batch.batch["attention_mask"].bool()
    scores = [
        sequence_classifier_score(model, batch.batch["input_ids"][i][mask[i]].tolist()) for i in range(len(batch))
    ]
    torch.testing.assert_close(rm_scores, expected_rm_scores(batch, scores), atol=ATOL, rtol=0)
    assert len(set(round(s, 3) for s in scores)) == len(scores)  # the texts really score differently
    assert metrics["reward/model/truncated"] == 0


def test_rerendered_chat_with_a_different_tokenizer(scored, batch):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path, rm_scores, _ = scored["variant"]
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32)
    scores = []
    for chat, response in zip(CHATS, RESPONSES):
        messages = chat + [{"role": "assistant", "content": response}]
        ids = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
        assert tokenizer.convert_tokens_to_ids("<|rm_turn|>") in ids  # the reward model's own template
        scores.append(sequence_classifier_score(model, ids))
    torch.testing.assert_close(rm_scores, expected_rm_scores(batch, scores), atol=ATOL, rtol=0)


def test_causal_lm_with_value_head(scored, batch):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    path, rm_scores, _ = scored["value_head"]
    state = load_file(f"{path}/model.safetensors")
    weight, bias = state["v_head.summary.weight"], state["v_head.summary.bias"]
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    mask = batch.batch["attention_mask"].bool()
    scores = []
    with torch.no_grad():
        for i in range(len(batch)):
            ids = batch.batch["input_ids"][i][mask[i]]
            hidden = model(input_ids=ids[None], output_hidden_states=True).hidden_states[-1][0, -1]
            scores.append(float(hidden @ weight[0] + bias[0]))
    torch.testing.assert_close(rm_scores, expected_rm_scores(batch, scores), atol=ATOL, rtol=0)


def test_truncated_rerendering_keeps_the_end(batch):
    from verl.workers.reward_model.inputs import rerendered_inputs
    from verl.workers.reward_model.role import load_tokenizer

    tokenizer = load_tokenizer(smollm2_path(), False)
    full = rerendered_inputs(batch, tokenizer, tokenizer, max_length=10_000)
    cut = rerendered_inputs(batch, tokenizer, tokenizer, max_length=20)
    assert cut.num_truncated == len(batch) and full.num_truncated == 0
    for i in range(len(batch)):
        ids = full.input_ids[i][full.attention_mask[i].bool()]
        torch.testing.assert_close(cut.input_ids[i][cut.attention_mask[i].bool()], ids[-20:])
