"""``use_torch_compile`` on the FSDP engine: the compiled decoder layers give the eager engine's loss and
gradients, and packed micro-batches of a new token count reuse the compiled graph instead of compiling again."""

from __future__ import annotations

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rollout_batch, run_on_ranks


def _loss_and_grads(engine, batch):
    from verl.workers.engine.fsdp.forward import forward_log_probs

    engine.zero_grad()
    log_probs, _ = forward_log_probs(
        engine.forward_module,
        batch["input_ids"],
        batch["attention_mask"],
        batch["position_ids"],
        use_remove_padding=True,
    )
    loss = -(log_probs * batch["attention_mask"]).sum() / batch["attention_mask"].sum()
    loss.backward()
    return float(loss), {n: p.grad.full_tensor().clone() for n, p in engine.module.named_parameters()}


def _compile_rank(rank, world, model_path):
    from torch._dynamo.utils import counters

    from verl.workers.config import FSDPEngineConfig, HFModelConfig, OptimConfig
    from verl.workers.engine.fsdp.engine import FSDPEngine

    def engine(compiled: bool):
        config = HFModelConfig(path=model_path, use_remove_padding=True, enable_gradient_checkpointing=False)
        return FSDPEngine(
            config, FSDPEngineConfig(), OptimConfig(lr=1e-2), role="actor", use_torch_compile=compiled
        ).initialize()

    eager, compiled = engine(False), engine(True)
    out = {"loss": [], "grad_diff": [], "graphs": []}
    for batch_size, seed in ((4, 0), (6, 1), (3, 2)):  # three packed lengths
        batch = rollout_batch(batch_size=batch_size, seed=seed)
        eager_loss, eager_grads = _loss_and_grads(eager, batch)
        loss, grads = _loss_and_grads(compiled, batch)
        out["loss"].append((eager_loss, loss))
        out["grad_diff"].append(max((grads[n] - g).abs().max().item() for n, g in eager_grads.items()))
        out["graphs"].append(counters["stats"]["unique_graphs"])
    return out


def test_compiled_layers_match_eager_and_do_not_recompile_for_new_lengths():
    (out,) = run_on_ranks(_compile_rank, 1, tiny_model_path())
    for eager_loss, loss in out["loss"]:
        assert abs(loss - eager_loss) < 1e-4 * max(1.0, abs(eager_loss))
    assert max(out["grad_diff"]) < 1e-4
    first, *later = out["graphs"]
    assert first > 0 and all(count == first for count in later), out["graphs"]


def _two_block_model():
    """Two decoder-layer stand-ins, found by ``compile_decoder_layers`` through ``_no_split_modules``."""
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.nn.functional.silu(self.linear(x)) * x

    class Model(torch.nn.Sequential):
        _no_split_modules = ["Block"]

    torch.manual_seed(0)
    return Model(Block(), Block())


def test_cuda_layers_compile_with_nd_tiling_and_cpu_layers_without(monkeypatch):
    """On CUDA the decoder layers get ``CUDA_COMPILE_OPTIONS`` (its docstring has the measurement); the CPU path
    compiles exactly as before. The options' keys exist in this torch and compile: a torch that renamed
    ``triton.prefer_nd_tiling`` fails here, not at the first GPU step."""
    import torch

    from verl.workers.engine.fsdp import engine

    seen = []
    real_compile = torch.compile

    def recording_compile(fn, **kwargs):
        seen.append(kwargs)
        return real_compile(fn, **kwargs)

    monkeypatch.setattr(engine.torch, "compile", recording_compile)
    cpu_model = _two_block_model()
    engine.compile_decoder_layers(cpu_model)
    assert seen == [{"dynamic": True, "options": None}] * 2
    seen.clear()
    cuda_model = _two_block_model()
    engine.compile_decoder_layers(cuda_model, device_type="cuda")
    assert seen == [{"dynamic": True, "options": {"triton.prefer_nd_tiling": True}}] * 2
    torch._dynamo.reset()
    x = torch.randn(5, 4)
    expected = x
    for layer in _two_block_model():
        expected = torch.nn.functional.silu(layer.linear(expected)) * expected
    torch.testing.assert_close(cuda_model(x), expected)  # the options compile (inductor's CPU backend ignores them)
