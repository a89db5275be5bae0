"""FLOPs of a training step of a dense decoder-only transformer, for the MFU metric.

For ``T = sum(seqlens)`` tokens and ``N`` matmul parameters (everything but the input embedding lookup),
forward + backward cost ``6 N T`` (Kaplan et al. 2020, arXiv:2001.08361 §2.1) plus causal attention
``12 * sum(s^2) * head_dim * num_heads * num_layers`` (scores and weighted sum, forward 4·s²·d per layer and
head, backward twice that); a forward pass alone (log-probs, values) is a third of that: ``2 N T`` and
``4 * sum(s^2) * ...``. These are model FLOPs: activation recomputation and the fused head's recomputed logits
are not counted (MFU, not hardware FLOPs utilisation). The output layer is the vocabulary projection of a
causal LM, or a ``hidden x 1`` value head for a critic (``output_size=1``); where a pass runs it on some positions
alone (the actor's log-probs of the responses), ``head_tokens`` says on how many. The attention term counts the full
``s x s`` score matrix, as verl's counter does. The device's peak comes from a table of dense bf16 tensor-core
numbers; an unknown device (CPU included) has no peak, and MFU is then reported as 0, never guessed.
"""

from __future__ import annotations

import torch

# dense (no sparsity) bf16 peak TFLOPS from the vendors' data sheets
PEAK_BF16_TFLOPS: dict[str, float] = {
    "H200": 989.0,
    "H100": 989.0,
    "H800": 989.0,
    "H20": 148.0,
    "A100": 312.0,
    "A800": 312.0,
    "L40S": 362.0,
}

DENSE_MODEL_TYPES = {"llama", "qwen2", "qwen3", "mistral", "smollm", "gemma", "gemma2", "phi3"}


def get_device_peak_tflops(device_name: str | None = None) -> float | None:
    """Peak dense bf16 TFLOPS of ``device_name`` (default: the current CUDA device); None when unknown."""
    if device_name is None:
        if not torch.cuda.is_available():
            return None
        device_name = torch.cuda.get_device_name()
    for key, tflops in PEAK_BF16_TFLOPS.items():
        if key in device_name.upper():
            return tflops
    return None


class FlopsCounter:
    """Estimate achieved TFLOPS of a step from its sequence lengths and time (dense Llama/Qwen2/Mistral)."""

    def __init__(self, config, device_name: str | None = None, output_size: int | None = None):
        model_type = getattr(config, "model_type", None)
        if model_type not in DENSE_MODEL_TYPES:
            raise ValueError(
                f"FlopsCounter supports dense decoder models {sorted(DENSE_MODEL_TYPES)}; got model_type={model_type!r}"
            )
        self.config = config
        self.output_size = output_size if output_size is not None else config.vocab_size
        self.peak_tflops = get_device_peak_tflops(device_name)

    def matmul_params(self) -> int:
        """Parameters that take part in matmuls: attention and MLP projections of every layer and the output
        layer (``output_size x hidden``)."""
        c = self.config
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        kv_heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
        q_width = c.num_attention_heads * head_dim
        attention = c.hidden_size * (q_width + 2 * kv_heads * head_dim) + q_width * c.hidden_size
        mlp = 3 * c.hidden_size * c.intermediate_size
        return c.num_hidden_layers * (attention + mlp) + self.output_size * c.hidden_size

    def step_flops(self, batch_seqlens: list[int], backward: bool = True, head_tokens: float | None = None) -> float:
        """FLOPs of one pass over sequences of lengths ``batch_seqlens``: forward + backward, or forward alone; the
        output layer on ``head_tokens`` positions (default: every token)."""
        c = self.config
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        tokens = sum(batch_seqlens)
        square_sum = sum(s * s for s in batch_seqlens)
        head_params = self.output_size * c.hidden_size
        head_tokens = tokens if head_tokens is None else head_tokens
        dense = 6 * ((self.matmul_params() - head_params) * tokens + head_params * head_tokens)
        attention = 12 * square_sum * head_dim * c.num_attention_heads * c.num_hidden_layers
        return float(dense + attention) if backward else float(dense + attention) / 3

    def estimate_flops(
        self, batch_seqlens: list[int], delta_time: float, backward: bool = True, head_tokens: float | None = None
    ) -> tuple[float, float | None]:
        """``(achieved TFLOPS, peak TFLOPS of one device or None)``; divide achieved by world size × peak for MFU."""
        return self.step_flops(batch_seqlens, backward, head_tokens) / delta_time / 1e12, self.peak_tflops

    def mfu(
        self,
        batch_seqlens: list[int],
        delta_time: float,
        world_size: int,
        backward: bool = True,
        head_tokens: float | None = None,
    ) -> float:
        """MFU of ``world_size`` devices that together ran one pass over ``batch_seqlens`` in ``delta_time`` s (the
        output layer on ``head_tokens`` positions, default all)."""
        achieved, peak = self.estimate_flops(batch_seqlens, delta_time, backward, head_tokens)
        return compute_mfu(achieved, peak, world_size)


def compute_mfu(achieved_tflops: float, peak_tflops: float | None, world_size: int) -> float:
    """Model FLOPs utilisation; 0.0 when the peak is unknown (e.g. CPU), never an invented number."""
    if not peak_tflops:
        return 0.0
    return achieved_tflops / (peak_tflops * world_size)
