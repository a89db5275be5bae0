"""The fused output head: next-token log-probs and entropy straight from the last hidden states.

Inside :func:`fused_log_prob_head` the model's output layer (``get_output_embeddings()``, e.g. ``lm_head``)
returns ``(1, T, 2)`` (log-prob, entropy) or ``(1, T, 1)`` (log-prob) float32 instead of ``(1, T, V)`` logits,
computed by :func:`verl.utils.chunked_logprobs.log_probs_from_hidden`, so the vocabulary logits of the whole
micro-batch never exist. The swap happens inside the model's own forward call, so FSDP2 has the output weight
gathered (and reduces its gradient) exactly as for the plain linear layer.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn

from verl.utils.chunked_logprobs import log_probs_from_hidden

# transformers configs that change the logits after the output layer; the fused head would skip that step
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "output_multiplier_scale", "logits_scaling")


def output_layer(module: nn.Module) -> nn.Linear:
    """The vocabulary projection of a causal LM (peft and FSDP wrappers pass the call through)."""
    head = module.get_output_embeddings()
    if not isinstance(head, nn.Linear) or head.bias is not None:
        raise ValueError(
            f"use_fused_kernels needs a bias-free nn.Linear output layer; {type(module).__name__} has {head!r}"
        )
    return head


def check_fused_head_supported(module: nn.Module) -> None:
    """Fail early for models whose logits are transformed after the output layer (softcapping, scaling)."""
    output_layer(module)
    config = getattr(module, "config", None)
    for name in _LOGIT_TRANSFORMS:
        value = getattr(config, name, None)
        if value not in (None, 1.0, 0.0, False):
            raise ValueError(
                f"model.use_fused_kernels=True cannot reproduce this model's logits ({name}={value}); "
                "set actor_rollout_ref.model.use_fused_kernels=False"
            )


@contextmanager
def fused_log_prob_head(
    module: nn.Module, labels: torch.Tensor, temperature: float, calculate_entropy: bool, compiled: bool = False
):
    """Within the block, ``module(...).logits`` is ``(1, T, 1 + calculate_entropy)``: the log-prob of
    ``labels (T,)`` under ``softmax(logits / temperature)`` and the entropy, float32."""
    head = output_layer(module)

    def forward(hidden: torch.Tensor) -> torch.Tensor:
        flat = hidden.reshape(-1, hidden.shape[-1])
        log_probs, entropy = log_probs_from_hidden(
            flat, head.weight, labels, temperature, calculate_entropy, compiled=compiled
        )
        parts = [log_probs] if entropy is None else [log_probs, entropy]
        return torch.stack(parts, dim=-1).reshape(*hidden.shape[:-1], len(parts))

    head.forward = forward
    try:
        yield
    finally:
        del head.forward
