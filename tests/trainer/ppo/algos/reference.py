"""Random ragged batches and plain float64 references shared by the algorithm tests.

Everything here is written independently of ``verl.trainer.ppo.algos``: Python loops over rows and
valid positions, numpy float64 arithmetic.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from verl.workers.config import ActorConfig, PolicyLossConfig


def ragged_batch(seed: int, batch_size: int = 11, length: int = 7) -> SimpleNamespace:
    """Right-padded responses of random lengths (row 0 is empty, every other row has >= 1 token),
    token rewards that are zero on padding, and uneven groups including one of size one."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, length + 1, size=batch_size)
    lengths[0] = 0
    mask = (np.arange(length)[None, :] < lengths[:, None]).astype(np.float64)
    rewards = rng.normal(size=(batch_size, length)) * mask
    # Groups of sizes 4, 3, 1, 3 (uneven, one singleton); labels are uid strings as in a real batch.
    group_sizes = [4, 3, 1, batch_size - 8]
    labels = np.array([f"uid-{g}" for g, size in enumerate(group_sizes) for _ in range(size)], dtype=object)
    labels = labels[rng.permutation(batch_size)]
    values = rng.normal(size=(batch_size, length))
    return SimpleNamespace(
        rng=rng,
        lengths=lengths,
        mask=mask,
        rewards=rewards,
        index=labels,
        values=values,
        torch_mask=torch.tensor(mask),
        torch_rewards=torch.tensor(rewards),
        torch_values=torch.tensor(values),
    )


def groups_of(index: np.ndarray) -> dict[object, list[int]]:
    groups: dict[object, list[int]] = {}
    for row, label in enumerate(index):
        groups.setdefault(label, []).append(row)
    return groups


def whiten(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(v - mean) / sqrt(unbiased var + 1e-8) over the masked entries."""
    selected = values[mask > 0]
    mean = selected.mean() if selected.size else 0.0
    var = selected.var(ddof=1) if selected.size > 1 else 0.0
    return (values - mean) / np.sqrt(var + 1e-8)


def aggregate(loss: np.ndarray, mask: np.ndarray, mode: str, num_tokens=None, num_seqs=None, scale=None) -> float:
    """Plain loops for the four loss aggregation modes."""
    batch_size, length = loss.shape
    if mode == "token-mean":
        total = sum(loss[i, t] for i in range(batch_size) for t in range(length) if mask[i, t] > 0)
        count = num_tokens if num_tokens is not None else max(mask.sum(), 1)
        return total / count
    per_seq = []
    for i in range(batch_size):
        tokens = [loss[i, t] for t in range(length) if mask[i, t] > 0]
        if not tokens:
            continue
        if mode == "seq-mean-token-sum":
            per_seq.append(sum(tokens))
        elif mode == "seq-mean-token-mean":
            per_seq.append(sum(tokens) / len(tokens))
        elif mode == "seq-mean-token-sum-norm":
            per_seq.append(sum(tokens) / (length if scale is None else scale))
        else:
            raise ValueError(mode)
    count = num_seqs if num_seqs is not None else max(len(per_seq), 1)
    return sum(per_seq) / count


AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def actor_config(**overrides) -> ActorConfig:
    """The typed actor config the losses read, with every value the tests rely on written out."""
    policy_loss = PolicyLossConfig(
        loss_mode="vanilla",
        clip_cov_ratio=0.0002,
        clip_cov_lb=1.0,
        clip_cov_ub=5.0,
        kl_cov_ratio=0.0002,
        ppo_kl_coef=0.1,
    )
    for key in list(overrides):
        if hasattr(policy_loss, key):
            setattr(policy_loss, key, overrides.pop(key))
    fields = dict(clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0, tau_pos=1.0, tau_neg=1.05)
    fields.update(overrides)
    return ActorConfig(policy_loss=policy_loss, **fields)
