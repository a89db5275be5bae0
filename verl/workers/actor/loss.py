"""The actor's loss for one micro-batch, shared by every training engine (FSDP2, Megatron).

    loss = pg_loss - entropy_coeff * entropy + kl_loss_coef * KL(pi || pi_ref)     (all via ``agg_loss``)

Each term is aggregated with the mini-batch's global token / sequence counts over all data-parallel ranks, so
the micro-batch losses of all ranks sum to the mini-batch loss whatever the split.

An on-policy step (one epoch over one mini-batch) may come without ``old_log_probs``: π_old is the policy being
updated, before its only optimizer step, so ``old_log_probs = log_prob.detach()`` (verl does the same), and the
entropy is measured in the same forward pass for ``actor/entropy`` (the trainer skips its separate log-prob pass,
``actor.skip_old_log_prob_on_policy``).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import agg_loss, get_policy_loss_fn, kl_penalty
from verl.workers.config import ActorConfig, PPOUpdateConfig

SUMMED_METRICS = frozenset({"actor/pg_loss", "actor/entropy", "actor/kl_loss"})
"""Metrics that are a micro-batch's share of a mini-batch value: summed over micro-batches and ranks."""


def scalar(value) -> float:
    return float(value.detach().item()) if isinstance(value, torch.Tensor) else float(value)


def entropy_coeff(config: ActorConfig) -> float:
    return float(config.entropy_coeff)


def is_on_policy_batch(micro_batch) -> bool:
    """True when the batch carries no ``old_log_probs``: they come from the update's own forward pass."""
    return "old_log_probs" not in micro_batch.keys()


def needs_entropy(config: ActorConfig, micro_batch) -> bool:
    """The forward pass computes the entropy: for the loss (``entropy_coeff != 0``) or, on-policy, for the
    ``actor/entropy`` metric the skipped log-prob pass would have reported."""
    return entropy_coeff(config) != 0 or is_on_policy_batch(micro_batch)


def require_on_policy(config: PPOUpdateConfig, data: DataProto) -> None:
    """Without ``old_log_probs`` the step must be on-policy: one epoch over one (per-rank) mini-batch."""
    epochs, mini_batch_size = int(config.ppo_epochs), int(config.ppo_mini_batch_size)
    if epochs != 1 or len(data) != mini_batch_size:
        raise ValueError(
            f"update_policy got no old_log_probs, which only an on-policy step can take from its own forward pass; "
            f"this one has ppo_epochs={epochs} and {len(data) // max(1, mini_batch_size)} mini-batches of "
            f"{mini_batch_size} rows. Compute old_log_probs first (compute_log_prob)"
        )


def actor_loss(
    config: ActorConfig, log_prob: torch.Tensor, entropy: torch.Tensor | None, micro_batch, counts: tuple[float, float]
) -> tuple[torch.Tensor, dict[str, float]]:
    """``(loss, metrics)`` of a micro-batch from its ``log_prob`` and ``entropy`` ``(bs, R)`` (entropy as
    :func:`needs_entropy` says); ``micro_batch`` holds ``response_mask``, ``advantages``, ``old_log_probs`` (absent
    on-policy) and, as configured, ``ref_log_prob`` and ``rollout_is_weights``; ``counts`` are the global
    ``(tokens, sequences)``."""
    loss_agg_mode = config.loss_agg_mode
    num_tokens, num_seqs = counts
    response_mask = micro_batch["response_mask"].to(log_prob.dtype)
    policy_loss_fn = get_policy_loss_fn(config.policy_loss.loss_mode)
    old_log_prob = log_prob.detach() if is_on_policy_batch(micro_batch) else micro_batch["old_log_probs"]
    pg_loss, pg_metrics = policy_loss_fn(
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        advantages=micro_batch["advantages"],
        response_mask=response_mask,
        loss_agg_mode=loss_agg_mode,
        config=config,
        rollout_is_weights=micro_batch.get("rollout_is_weights", None),
        global_num_tokens=num_tokens,
        global_num_seqs=num_seqs,
    )
    loss = pg_loss
    metrics = {"actor/pg_loss": scalar(pg_loss)}
    for name, value in pg_metrics.items():
        metrics[name if name.startswith("actor/") else f"actor/{name}"] = scalar(value)
    agg = dict(loss_agg_mode=loss_agg_mode, global_num_tokens=num_tokens, global_num_seqs=num_seqs)
    coeff = entropy_coeff(config)
    if entropy is not None:
        entropy_loss = agg_loss(entropy if coeff != 0 else entropy.detach(), response_mask, **agg)
        if coeff != 0:
            loss = loss - coeff * entropy_loss
        metrics["actor/entropy"] = scalar(entropy_loss)
    if config.use_kl_loss:
        kld = kl_penalty(log_prob, micro_batch["ref_log_prob"], config.kl_loss_type)
        kl_loss = agg_loss(kld, response_mask, **agg)
        loss = loss + config.kl_loss_coef * kl_loss
        metrics["actor/kl_loss"] = scalar(kl_loss)
        metrics["actor/kl_coef"] = float(config.kl_loss_coef)
    return loss, metrics


def update_keys(config: ActorConfig, data: DataProto, model_input_keys: list[str]) -> list[str]:
    """Batch keys an actor update reads (``old_log_probs`` when the batch has them: see :func:`require_on_policy`)."""
    keys = model_input_keys + ["response_mask", "advantages"]
    if "old_log_probs" in data.batch.keys():
        keys.append("old_log_probs")
    if config.use_kl_loss:
        keys.append("ref_log_prob")
    if "rollout_is_weights" in data.batch.keys():
        keys.append("rollout_is_weights")
    return keys


def mini_batches(config: PPOUpdateConfig, data: DataProto, epoch: int) -> list[DataProto]:
    """``data`` (optionally shuffled with ``data_loader_seed + epoch``) split into per-rank mini-batches of
    ``config.ppo_mini_batch_size`` rows."""
    if config.shuffle:
        generator = torch.Generator().manual_seed(config.data_loader_seed + epoch)
        data = data.select_idxs(torch.randperm(len(data), generator=generator).numpy())
    mini_batch_size = int(config.ppo_mini_batch_size)
    if mini_batch_size <= 0 or len(data) % mini_batch_size:
        raise ValueError(
            f"per-rank batch of {len(data)} rows is not divisible by the per-rank ppo_mini_batch_size "
            f"{mini_batch_size}; adjust actor.ppo_mini_batch_size / data.train_batch_size"
        )
    return data.split(mini_batch_size)


def reduce_step_metrics(
    step_metrics: dict[str, list[float]], sum_over_ranks, summed: frozenset[str] = SUMMED_METRICS
) -> dict[str, float]:
    """One mini-batch's metrics: shares summed over micro-batches and (through ``sum_over_ranks``) ranks for
    ``summed`` (a loss's share metrics, default :data:`SUMMED_METRICS`), other (ratio) metrics averaged over
    micro-batches."""
    out = {}
    for name, values in step_metrics.items():
        out[name] = sum_over_ranks(sum(values)) if name in summed else sum(values) / len(values)
    return out


@contextmanager
def step_overrides(actor, meta_info: dict):
    """The trainer's per-step settings for one ``update_policy``: ``meta_info["entropy_coeff"]`` (adaptive entropy
    control) replaces ``actor.config.entropy_coeff`` while the update runs."""
    coeff = meta_info.get("entropy_coeff")
    if coeff is None:
        yield
        return
    from verl.workers.actor.role_utils import with_fields

    original = actor.config
    actor.config = with_fields(original, entropy_coeff=float(coeff))
    try:
        yield
    finally:
        actor.config = original
