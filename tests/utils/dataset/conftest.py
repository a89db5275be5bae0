import pytest
from transformers import AutoTokenizer

from tests.support.models import smollm2_path


@pytest.fixture(scope="session")
def tokenizer():
    return AutoTokenizer.from_pretrained(smollm2_path())
