"""Fixtures shared by the reward-model role tests (FSDP2 and Megatron)."""

from __future__ import annotations

import pytest

from tests.workers.reward_model.helpers import chat_batch


@pytest.fixture(scope="module")
def batch():
    """The chat rollout batch every reward-model role test scores (see ``helpers.chat_batch``)."""
    return chat_batch()
