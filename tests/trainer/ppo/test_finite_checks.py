"""The trainer refuses to update on NaN/inf and names the tensor, its producer and the rows."""

import numpy as np
import pytest
import torch

from verl.protocol import DataProto
from verl.trainer.ppo.finite_checks import NonFiniteError, check_update_inputs, check_update_losses


def _batch() -> DataProto:
    """4 sequences of 3 response tokens; row 3's last token is padding."""
    mask = torch.tensor([[1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 0]])
    tensors = {key: torch.zeros(4, 3) for key in ("token_level_scores", "old_log_probs", "advantages", "returns")}
    sources = np.array(["gsm8k", "math", "gsm8k", "math"], dtype=object)
    return DataProto.from_dict(tensors={**tensors, "response_mask": mask}, non_tensors={"data_source": sources})


def test_finite_batch_passes_and_padding_is_ignored():
    batch = _batch()
    batch.batch["advantages"][3, 2] = float("nan")  # outside the response mask
    check_update_inputs(batch, step=5)


def test_the_first_non_finite_tensor_in_step_order_is_named():
    batch = _batch()
    batch.batch["old_log_probs"][1, 0] = float("nan")
    batch.batch["old_log_probs"][2, 1] = float("-inf")
    batch.batch["advantages"][:] = float("nan")  # downstream of the log-probs: not the origin
    with pytest.raises(NonFiniteError) as info:
        check_update_inputs(batch, step=5)
    message = str(info.value)
    assert message.startswith(
        "step 5: old_log_probs holds nan at 2 response tokens of 2 of 4 sequences (rows 1 ('math'), 2 ('gsm8k'))"
    )
    assert "comes from the actor's log-prob recomputation" in message
    assert "The update was not run" in message


def test_scores_are_blamed_on_the_reward():
    batch = _batch()
    batch.batch["token_level_scores"][0, 2] = float("inf")
    with pytest.raises(NonFiniteError, match=r"token_level_scores holds inf .* comes from the reward"):
        check_update_inputs(batch, step=1)


def test_non_finite_loss_after_the_update():
    check_update_losses({"actor/pg_loss": 0.1, "critic/vf_loss": 2.0, "actor/grad_norm": 1.0}, step=3)
    with pytest.raises(NonFiniteError) as info:
        check_update_losses({"actor/pg_loss": float("nan"), "actor/grad_norm": float("nan")}, step=3)
    message = str(info.value)
    assert "step 3: the update's loss is not finite (actor/pg_loss=nan; grad norms {'actor/grad_norm': nan})" in message
    assert "the model's forward pass made it" in message
