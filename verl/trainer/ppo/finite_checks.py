"""The trainer refuses to update on non-finite numbers, and says which phase of the step produced them.

Before the critic and actor updates, every tensor their losses read is checked on the response tokens
(``response_mask (bs, R)``), in the order the step computes them: model scores, scores, rollout / old / reference
log-probs, values, rewards after the KL penalty, advantages and returns. The first one holding NaN or infinity names
its producer: a NaN that first shows in the advantages was made by the estimator from finite inputs. After the
updates, a non-finite loss means the model's forward made it from finite inputs (the worker skipped every optimizer
step whose gradient norm was not finite).

Either way :class:`NonFiniteError` stops the run before anything is trained on the NaN; checkpoints already written
are intact.
"""

from __future__ import annotations

import math

import torch

from verl.protocol import DataProto

UPDATE_INPUTS = (
    ("rm_scores", "the reward model's scores (reward_model.enable)"),
    (
        "token_level_scores",
        "the reward: the reward function's results are checked when they are scored (reward_model.scoring), so a "
        "reward model or a custom reward manager made it",
    ),
    ("rollout_log_probs", "the rollout engine's log-probs (actor_rollout_ref.rollout.calculate_log_probs)"),
    (
        "old_log_probs",
        "the actor's log-prob recomputation: the policy's forward pass is not finite (diverged weights?)",
    ),
    ("ref_log_prob", "the reference policy's log-probs"),
    ("values", "the critic's values: its forward pass is not finite (diverged weights?)"),
    ("token_level_rewards", "the KL penalty in the reward (algorithm.use_kl_in_reward) applied to finite scores"),
    ("advantages", "the advantage estimator (algorithm.adv_estimator) from finite rewards and values"),
    ("returns", "the advantage estimator (algorithm.adv_estimator) from finite rewards and values"),
)
"""Batch keys the losses read, in the order the step produces them, with what produces each."""

UPDATE_LOSSES = ("critic/vf_loss", "actor/pg_loss", "actor/kl_loss", "actor/entropy")
"""Loss metrics of the updates; non-finite means the forward pass made a NaN from finite inputs."""


class NonFiniteError(RuntimeError):
    """NaN or infinity reached a loss input or a loss; the message names the tensor, its producer and the rows."""


def _where(batch: DataProto, rows: list[int]) -> str:
    data_sources = batch.non_tensor_batch.get("data_source")
    shown = ", ".join(f"{row} ({data_sources[row]!r})" if data_sources is not None else str(row) for row in rows[:5])
    return f"rows {shown}{' ...' if len(rows) > 5 else ''}"


def check_update_inputs(batch: DataProto, step: int) -> None:
    """Raise :class:`NonFiniteError` naming the first loss input with a non-finite value on a response token."""
    mask = batch.batch["response_mask"].bool()
    for key, producer in UPDATE_INPUTS:
        if key not in batch.batch.keys():
            continue
        tensor = batch.batch[key]
        bad = ~torch.isfinite(tensor.float()) & mask
        if not bad.any():
            continue
        rows = torch.nonzero(bad.any(-1)).flatten().tolist()
        value = float(tensor[rows[0]][bad[rows[0]]][0])
        raise NonFiniteError(
            f"step {step}: {key} holds {value} at {int(bad.sum())} response tokens of {len(rows)} of {len(batch)} "
            f"sequences ({_where(batch, rows)}); every tensor computed before it is finite, so it comes from "
            f"{producer}. The update was not run: nothing was trained on it, and checkpoints already saved are intact."
        )


def check_update_losses(metrics: dict[str, float], step: int) -> None:
    """Raise :class:`NonFiniteError` when an update reported a non-finite loss (its inputs were checked finite)."""
    bad = {key: metrics[key] for key in UPDATE_LOSSES if key in metrics and not math.isfinite(metrics[key])}
    if not bad:
        return
    norms = {key: metrics[key] for key in ("actor/grad_norm", "critic/grad_norm") if key in metrics}
    raise NonFiniteError(
        f"step {step}: the update's loss is not finite ({', '.join(f'{k}={v}' for k, v in bad.items())}; grad norms "
        f"{norms}) although every input of the loss was finite: the model's forward pass made it (diverged weights, "
        "a too high learning rate, or an overflow in low precision). Optimizer steps with a non-finite gradient norm "
        "were skipped. Stopping before the next step; checkpoints already saved are intact (resume from one with a "
        "lower optim.lr or grad_clip)."
    )
