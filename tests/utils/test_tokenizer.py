"""verl.utils.hf_tokenizer / hf_processor on the real SmolLM2 tokenizer, with verl's signature and corrections."""

import inspect

import pytest
from transformers import AutoTokenizer

from tests.support.models import smollm2_path
from verl.utils import hf_processor, hf_tokenizer


def test_tokenizer_has_a_pad_token_and_text_models_have_no_processor():
    tokenizer = hf_tokenizer(smollm2_path())
    assert tokenizer.pad_token_id is not None
    assert tokenizer.decode(tokenizer("2 + 2")["input_ids"]) == "2 + 2"
    assert hf_processor(smollm2_path()) is None
    assert hf_processor(smollm2_path(), trust_remote_code=False) is None


def test_signatures_are_verls():
    assert list(inspect.signature(hf_tokenizer).parameters) == [
        "name_or_path",
        "correct_pad_token",
        "correct_gemma2",
        "kwargs",
    ]
    assert list(inspect.signature(hf_processor).parameters) == ["name_or_path", "kwargs"]


@pytest.fixture(scope="module")
def saved_tokenizers(tmp_path_factory):
    """SmolLM2's tokenizer saved twice: without a pad token, and under a folder named like gemma-2-2b-it."""
    root = tmp_path_factory.mktemp("tokenizers")
    no_pad = AutoTokenizer.from_pretrained(smollm2_path())
    no_pad.pad_token = None
    no_pad.save_pretrained(root / "no_pad")
    AutoTokenizer.from_pretrained(smollm2_path()).save_pretrained(root / "google" / "gemma-2-2b-it")
    return root


def test_correct_pad_token_pads_with_eos_unless_turned_off(saved_tokenizers):
    path = str(saved_tokenizers / "no_pad")
    assert AutoTokenizer.from_pretrained(path).pad_token is None  # the saved folder really has no pad token
    corrected = hf_tokenizer(path)
    assert (corrected.pad_token, corrected.pad_token_id) == ("<|im_end|>", corrected.eos_token_id)
    assert hf_tokenizer(path, correct_pad_token=False).pad_token is None


def test_kwargs_reach_from_pretrained(saved_tokenizers):
    assert hf_tokenizer(smollm2_path()).padding_side == "right"
    assert hf_tokenizer(smollm2_path(), padding_side="left", trust_remote_code=False).padding_side == "left"


def test_gemma2_it_ends_turns_with_end_of_turn(saved_tokenizers):
    path = str(saved_tokenizers / "google" / "gemma-2-2b-it")
    assert hf_tokenizer(path).eos_token == "<end_of_turn>"
    assert hf_tokenizer(path, correct_gemma2=False).eos_token == "<|im_end|>"
