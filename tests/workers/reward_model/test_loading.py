"""``reward_head`` (what both engines load as the reward model's value head) checks the checkpoint kind first: a
classifier without its head, a multi-label classifier, a causal LM without a value head and another architecture
each fail naming the path and what was expected; the heads it returns are the saved tensors."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig

from tests.support.models import tiny_model_path
from tests.workers.reward_model.helpers import save_sequence_classifier, save_value_head_lm
from verl.workers.reward_model.loading import reward_head


def test_classifier_head_is_the_saved_score(tmp_path):
    path = save_sequence_classifier(tmp_path / "rm")
    weight, bias = reward_head(path, AutoConfig.from_pretrained(path))
    assert bias is None  # Llama's sequence classifier has no bias: the value head's is zero
    torch.testing.assert_close(weight, load_file(f"{path}/model.safetensors")["score.weight"], rtol=0, atol=0)


def test_value_head_of_a_causal_lm(tmp_path):
    path = save_value_head_lm(tmp_path / "lm")
    weight, bias = reward_head(path, AutoConfig.from_pretrained(path))
    state = load_file(f"{path}/model.safetensors")
    torch.testing.assert_close(weight, state["v_head.summary.weight"], rtol=0, atol=0)
    torch.testing.assert_close(bias, state["v_head.summary.bias"], rtol=0, atol=0)


def test_a_classifier_without_its_head_fails_naming_the_path(tmp_path):
    path = save_sequence_classifier(tmp_path / "rm")
    state = load_file(f"{path}/model.safetensors")
    del state["score.weight"]
    save_file(state, f"{path}/model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=f"path='{path}'.*has no 'score.weight' head"):
        reward_head(path, AutoConfig.from_pretrained(path))


def test_wrong_kinds_fail_naming_what_was_expected(tmp_path):
    path = save_sequence_classifier(tmp_path / "rm")
    config = AutoConfig.from_pretrained(path)
    config.num_labels = 3
    with pytest.raises(ValueError, match="num_labels=3; a reward model gives one score per sequence"):
        reward_head(path, config)
    config.architectures = ["LlamaModel"]
    with pytest.raises(ValueError, match=r"is a LlamaModel; expected \*ForSequenceClassification"):
        reward_head(path, config)
    lm = tiny_model_path("llama")
    with pytest.raises(ValueError, match="is a causal LM without a value head"):
        reward_head(lm, AutoConfig.from_pretrained(lm))
