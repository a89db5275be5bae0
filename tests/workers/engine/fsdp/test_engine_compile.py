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
