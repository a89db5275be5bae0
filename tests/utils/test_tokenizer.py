"""verl.utils.hf_tokenizer / hf_processor on the real SmolLM2 tokenizer."""

from tests.support.models import smollm2_path
from verl.utils import hf_processor, hf_tokenizer


def test_tokenizer_has_a_pad_token_and_text_models_have_no_processor():
    tokenizer = hf_tokenizer(smollm2_path())
    assert tokenizer.pad_token_id is not None
    assert tokenizer.decode(tokenizer("2 + 2")["input_ids"]) == "2 + 2"
    assert hf_processor(smollm2_path()) is None
