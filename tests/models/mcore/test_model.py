"""``verl.models.mcore.model`` under bf16 autocast with sequence parallelism, forward and backward.

On GPU the Megatron engine runs float32 weights under ``torch.autocast``. megatron-core's sequence-parallel
``ColumnParallelLinear`` (``linear_qkv``, ``linear_fc1``, the output layer) all-gathers its input and, in the
backward, reduce-scatters the input gradient into a buffer of the *input's* dtype; NCCL and gloo both refuse a
collective between two dtypes, so the norm in front of each projection must hand over the autocast dtype.

Two gloo ranks run the real megatron-core sequence-parallel layers at TP=2 under CPU bf16 autocast against the
float32 Hugging Face model run per sequence. Two CUDA-only details are bridged: ``torch.cuda.current_device()``
(where megatron-core places its sequence-parallel buffers) answers ``"cpu"``, and the embedding's dropout RNG fork
is a no-op (dropout is off).
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import reference_log_probs, rollout_batch, run_on_ranks

pytest.importorskip("megatron.core")

# bf16 keeps 8 mantissa bits (relative rounding 2**-9 per op): a log-prob of about -11 (tiny random model, 49k
# vocabulary) is off by up to 11 * 2**-9 ~ 0.02 (measured: max 0.002, mean 0.0007 over 11 response tokens).
LOG_PROB_ATOL = 0.02


def _sequence_parallel_rank(rank, world, path, batch):
    from megatron.core import tensor_parallel
    from megatron.core.transformer.transformer_config import TransformerConfig
    from transformers import AutoConfig

    from tests.workers.engine.megatron.helpers import reset_parallel_state
    from verl.models.mcore.config_converter import ParallelSizes, hf_to_mcore_config_kwargs
    from verl.models.mcore.loader import load_hf_weights
    from verl.models.mcore.model import build_chunks
    from verl.workers.engine.megatron.packed import pack_micro_batch
    from verl.workers.engine.megatron.parallel import ParallelLayout, Ranks, initialize_parallel_state
    from verl.workers.engine.megatron.vocab_parallel import vocab_parallel_log_probs_entropy

    torch.cuda.current_device = lambda: "cpu"  # megatron-core places its sequence-parallel buffers there
    # the sequence-parallel embedding forks the CUDA RNG for its dropout, which is off (hidden_dropout=0)
    tensor_parallel.get_cuda_rng_tracker().fork = lambda *_a, **_k: contextlib.nullcontext()
    initialize_parallel_state(
        ParallelLayout(tensor=2, pipeline=1, virtual_pipeline=None, data=1, sequence_parallel=True)
    )
    ranks = Ranks()
    hf_config = AutoConfig.from_pretrained(path)
    sizes = ParallelSizes(tensor=2, sequence_parallel=True)
    config = TransformerConfig(
        **hf_to_mcore_config_kwargs(hf_config, sizes, torch.float32, use_cpu_initialization=True)
    )
    (model,) = build_chunks(hf_config, config, value_model=False)
    load_hf_weights([model], path, hf_config, ranks.tp_rank, ranks.tp_size)
    projection_inputs = []
    for module in model.modules():
        if type(module).__name__ == "ColumnParallelLinear":
            module.register_forward_pre_hook(lambda _m, args: projection_inputs.append(args[0].dtype))
    packed = pack_micro_batch(batch, ranks.tp_size, torch.device("cpu"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(
            input_ids=packed.input_ids,
            position_ids=None,
            attention_mask=None,
            packed_seq_params=packed.packed_seq_params,
        )[0]
    vocab_start = ranks.tp_rank * logits.shape[-1]
    log_probs, _ = vocab_parallel_log_probs_entropy(logits, packed.labels, vocab_start, ranks.tp_group)
    response_length = batch["responses"].shape[1]
    response_log_probs = packed.unpack(log_probs)[:, -response_length - 1 : -1]
    # megatron-core's linears re-enter the forward's autocast in their backward only for CUDA (custom_bwd with
    # device_type="cuda"); on CPU the backward runs on this thread, so autocast around it does the same
    with torch.autocast("cpu", dtype=torch.bfloat16):
        (-(response_log_probs * batch["response_mask"]).sum()).backward()  # the sequence-parallel reduce-scatters
    grads = {name: p.grad for name, p in model.named_parameters()}
    reset_parallel_state()
    return {"log_probs": response_log_probs.detach(), "projection_inputs": projection_inputs, "grads": grads}


def test_sequence_parallel_bf16_autocast_forward_and_backward():
    from transformers import AutoModelForCausalLM

    path = tiny_model_path("llama")
    batch = rollout_batch(batch_size=4, seed=3)
    results = run_on_ranks(_sequence_parallel_rank, 2, path, batch)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        expected = reference_log_probs(model, batch)
    mask = batch["response_mask"].bool()
    for result in results:
        # every projection behind a norm (2 per layer) and the output layer see the autocast dtype
        assert result["projection_inputs"] == [torch.bfloat16] * (2 * model.config.num_hidden_layers + 1)
        torch.testing.assert_close(result["log_probs"][mask], expected[mask], atol=LOG_PROB_ATOL, rtol=0)
        for name, grad in result["grads"].items():
            assert grad is not None and grad.dtype == torch.float32, name  # float32 master weights' gradients
            assert torch.isfinite(grad).all() and grad.abs().sum() > 0, name
