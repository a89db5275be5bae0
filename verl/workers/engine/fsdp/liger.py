"""Liger kernels (``model.use_liger``): Triton RMSNorm, rotary embedding and SwiGLU MLP patched into the HF model.

The fused linear cross-entropy of Liger is left off, as in verl: it computes the gradient of a summed
cross-entropy during the forward pass, which a PPO loss (per-token weights known only later) cannot use; the log-prob
head is ``model.use_fused_kernels`` instead.
"""

from __future__ import annotations

from torch import nn

from verl.utils.device import is_cuda_available

LIGER_OPTIONS = dict(rope=True, rms_norm=True, swiglu=True, cross_entropy=False, fused_linear_cross_entropy=False)


def liger_unavailable_reason() -> str | None:
    """Why ``use_liger=True`` cannot run here, or None."""
    if not is_cuda_available():
        return (
            "actor_rollout_ref.model.use_liger=True needs a CUDA GPU (Liger's kernels are written in Triton); "
            "set it to false on this machine"
        )
    try:
        import liger_kernel.transformers  # noqa: F401
    except ImportError:
        return "actor_rollout_ref.model.use_liger=True needs the liger-kernel package: pip install -e .[gpu]"
    return None


def apply_liger(module: nn.Module) -> None:
    """Patch ``module`` (a transformers causal LM, before sharding) with Liger's kernels; fails for a model type
    Liger does not support."""
    reason = liger_unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)
    from liger_kernel.transformers.monkey_patch import MODEL_TYPE_TO_APPLY_LIGER_FN, _apply_liger_kernel_to_instance

    model_type = getattr(module.config, "model_type", None)
    if model_type not in MODEL_TYPE_TO_APPLY_LIGER_FN:
        raise ValueError(
            f"model.use_liger=True: Liger has no kernels for model_type={model_type!r}; supported: "
            f"{sorted(MODEL_TYPE_TO_APPLY_LIGER_FN)}"
        )
    _apply_liger_kernel_to_instance(model=module, **LIGER_OPTIONS)
