"""Load a reward model as a per-token scalar scorer: ``module(input_ids, ...).logits`` of shape ``(bs, S, 1)``.

The score of a sequence is the value at its last valid token (verl's convention). Two checkpoint kinds load:

- ``*ForSequenceClassification`` / ``*ForTokenClassification`` with one label: built as
  ``AutoModelForTokenClassification(num_labels=1)``, which holds the same backbone and ``score`` head but returns
  every position's value (a sequence-classification model returns the one at the last non-pad token);
- ``*ForCausalLM`` with a value head stored next to the weights (TRL's ``v_head.summary.*``, or ``v_head.*`` /
  ``value_head.*``): the backbone as above, the value head copied into ``score``.

:func:`reward_head` checks the kind and reads the head; the FSDP2 engine builds the module with
:func:`build_reward_module`, the Megatron engine loads the same head into its value head.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

VALUE_HEAD_PREFIXES = ("v_head.summary", "v_head", "value_head")
"""Where a causal LM checkpoint keeps its value head (weight ``(1, hidden)``, optional bias ``(1,)``)."""

CLASSIFIER_SUFFIXES = ("ForSequenceClassification", "ForTokenClassification")


def _score_head(module: nn.Module) -> tuple[str, nn.Linear]:
    for name in ("score", "classifier"):
        head = getattr(module, name, None)
        if isinstance(head, nn.Linear):
            return name, head
    raise ValueError(f"{type(module).__name__} has no linear 'score' or 'classifier' head")


def _checkpoint_tensors(path: str, prefixes: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """Tensors of the local checkpoint folder ``path`` whose names start with one of ``prefixes`` (safetensors or
    .bin files)."""
    folder = Path(path)
    found: dict[str, torch.Tensor] = {}
    for file in sorted(folder.glob("*.safetensors")):
        from safetensors import safe_open

        with safe_open(str(file), framework="pt") as handle:
            for key in handle.keys():
                if key.startswith(prefixes):
                    found[key] = handle.get_tensor(key)
    for file in sorted(folder.glob("*.bin")):
        state = torch.load(file, map_location="cpu", weights_only=True)
        found.update({key: value for key, value in state.items() if key.startswith(prefixes)})
    return found


def read_value_head(path: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(weight (1, hidden), bias (1,) | None)`` of the value head saved with a causal LM at ``path``."""
    tensors = _checkpoint_tensors(path, VALUE_HEAD_PREFIXES)
    for prefix in VALUE_HEAD_PREFIXES:
        weight = tensors.get(f"{prefix}.weight")
        if weight is not None:
            return weight.reshape(1, -1), tensors.get(f"{prefix}.bias")
    raise ValueError(
        f"reward_model.model.path={path!r} is a causal LM without a value head: none of "
        f"{[p + '.weight' for p in VALUE_HEAD_PREFIXES]} is in its weights. Use a sequence-classification reward "
        "model, add a value head, or set reward_model.use_reward_loop=True to use the model as a generative judge."
    )


HEAD_PREFIXES = ("score", "classifier")
"""Where a ``*ForSequenceClassification`` / ``*ForTokenClassification`` checkpoint keeps its one-label head."""


def reward_head(path: str, hf_config: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(weight (1, hidden), bias (1,) | None)`` of the reward model at ``path``: a one-label classifier's head, or
    a causal LM's value head. Any other architecture, label count or a missing head fails naming the path.

    ``hf_config`` is the checkpoint's own config (before it is turned into a token classifier's).
    """
    architecture = str((getattr(hf_config, "architectures", None) or [""])[0])
    if architecture.endswith("ForCausalLM"):
        return read_value_head(path)
    if not architecture.endswith(CLASSIFIER_SUFFIXES):
        raise ValueError(
            f"reward_model.model.path={path!r} is a {architecture or 'model without architectures'}; expected "
            "*ForSequenceClassification (one label) or a *ForCausalLM with a value head"
        )
    if int(getattr(hf_config, "num_labels", 1)) != 1:
        raise ValueError(
            f"reward_model.model.path={path!r} ({architecture}) has num_labels={hf_config.num_labels}; a reward model "
            "gives one score per sequence (num_labels=1)"
        )
    tensors = _checkpoint_tensors(path, tuple(f"{prefix}." for prefix in HEAD_PREFIXES))
    for prefix in HEAD_PREFIXES:
        weight = tensors.get(f"{prefix}.weight")
        if weight is not None:
            return weight.reshape(1, -1), tensors.get(f"{prefix}.bias")
    raise ValueError(f"reward_model.model.path={path!r} ({architecture}) has no 'score.weight' head in its weights")


def build_reward_module(path: str, hf_config: Any, load_kwargs: dict[str, Any]) -> nn.Module:
    """The reward model at ``path`` as a frozen ``AutoModelForTokenClassification`` with one label whose ``score``
    holds :func:`reward_head` (see module doc).

    ``hf_config`` is the checkpoint's config (with ``override_config`` applied); ``load_kwargs`` go to
    ``from_pretrained`` (dtype, attention implementation, trust_remote_code).
    """
    from transformers import AutoModelForTokenClassification

    weight, bias = reward_head(path, hf_config)
    hf_config.num_labels = 1
    hf_config.classifier_dropout = 0.0
    module = AutoModelForTokenClassification.from_pretrained(path, config=hf_config, **load_kwargs)
    _, head = _score_head(module)
    with torch.no_grad():
        head.weight.copy_(weight.to(head.weight.dtype))
        if head.bias is not None:
            # sequence classifiers have no bias: the token classifier's must add nothing
            head.bias.copy_(bias.to(head.bias.dtype) if bias is not None else torch.zeros_like(head.bias))
    module.requires_grad_(False)
    module.eval()
    return module
