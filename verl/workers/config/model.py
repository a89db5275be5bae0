"""Model config: which Hugging Face model to load and how (``actor_rollout_ref.model``, ``critic.model``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.workers.config.base import BaseConfig, pinned_field

DEFAULT_MODEL_PATH = "default"
"""Sentinel for ``model.path``: the embedded SmolLM2-135M-Instruct (``verl.utils.default_model``)."""


def resolve_model_path(path: str) -> str:
    """Return a loadable local path for ``path``, converting the embedded default model on first use.

    Resolution is lazy (called by the worker that loads the model), so composing or validating a config
    never touches the disk.
    """
    if path in (DEFAULT_MODEL_PATH, ""):
        from verl.utils.default_model import default_model_path

        return default_model_path()
    return path


@dataclass
class FusedKernelOptions(BaseConfig):
    """Options of the fused log-prob/entropy head."""

    impl_backend: str = pinned_field("torch", ("torch",), "Triton fused log-prob/entropy kernels", 15)
    """Kernel backend: ``torch`` (chunked PyTorch ops with a hand-written backward; runs on CPU and GPU)."""


@dataclass
class ModelSourceConfig(BaseConfig):
    """Which Hugging Face model to load and how to run it (shared by the policy, critic and reward models)."""

    path: str = DEFAULT_MODEL_PATH
    """Hugging Face model folder or hub id; ``default`` means the embedded SmolLM2-135M-Instruct."""

    external_lib: str | None = None
    """Python module imported before loading, for models that register custom Hugging Face classes."""

    override_config: dict[str, Any] = field(default_factory=dict)
    """Entries merged into the Hugging Face model config before the model is built (e.g. ``attention_dropout``)."""

    trust_remote_code: bool = False
    """Allow code shipped with the model (``trust_remote_code`` of transformers)."""

    use_remove_padding: bool = False
    """Run the model on packed (unpadded) tokens instead of the padded batch."""

    use_shm: bool = False
    """Load the model from a copy in shared memory (``/dev/shm/verl-cache``), made once per machine."""

    use_fused_kernels: bool = False
    """Compute log-probs and entropy from the last hidden states in chunks (fused output layer), so the
    ``(tokens, vocabulary)`` logits of a micro-batch never exist at once; one more output-layer matmul in backward."""

    fused_kernel_options: FusedKernelOptions = field(default_factory=FusedKernelOptions)
    """Implementation of the fused log-prob/entropy head (``use_fused_kernels``)."""

    @property
    def local_path(self) -> str:
        """Loadable local path of the model: the embedded default converted on first access, an ``hdfs://`` path
        copied to the local cache, and with ``use_shm`` the copy in ``/dev/shm``."""
        from verl.utils.fs import copy_to_local

        return copy_to_local(resolve_model_path(self.path), use_shm=self.use_shm)


@dataclass
class HFModelConfig(ModelSourceConfig):
    """A Hugging Face causal language model and the options used when loading it."""

    tokenizer_path: str | None = None
    """Tokenizer folder when it differs from ``path``; null uses the model's own tokenizer."""

    custom_chat_template: str | None = None
    """Jinja chat template that replaces the tokenizer's own; null keeps the tokenizer's template."""

    enable_gradient_checkpointing: bool = True
    """Recompute activations in the backward pass to save memory (training roles only): each layer keeps only its
    input and reruns its forward in the backward, about a third more compute for activation memory that no longer
    grows with the depth. verl's default; small models on CPU turn it off for speed (``ppo_demo``)."""

    enable_activation_offload: bool = False
    """Keep the activations saved for the backward pass in pinned host memory instead of GPU memory, copied back
    when the backward pass needs them (training roles only; on a CPU-only machine they are already there)."""

    lora_rank: int = 0
    """LoRA rank; 0 trains all weights, a positive value trains LoRA adapters only."""

    lora_alpha: int = 16
    """LoRA scaling numerator (the adapter output is scaled by ``lora_alpha / lora_rank``)."""

    target_modules: Any = "all-linear"
    """Modules that get LoRA adapters: ``all-linear`` or a list of module names."""

    exclude_modules: str | None = None
    """Regular expression of module names that never get LoRA adapters."""

    use_liger: bool = False
    """Liger kernels (Triton) for the model's RMSNorm, rotary embedding and SwiGLU MLP; needs a CUDA GPU and the
    ``liger-kernel`` package (``pip install -e .[gpu]``)."""

    @property
    def local_tokenizer_path(self) -> str:
        """Loadable local path of the tokenizer (``tokenizer_path`` or else the model's path)."""
        if not self.tokenizer_path:
            return self.local_path
        from verl.utils.fs import copy_to_local

        return copy_to_local(resolve_model_path(self.tokenizer_path), use_shm=self.use_shm)
