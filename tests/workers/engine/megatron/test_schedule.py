"""The Megatron engine's schedule without a pipeline: each micro-batch's backward right after its forward.

Two gloo ranks (TP=2, one stage) run three token-budget micro-batches through ``MegatronEngine.run``; a hook on
each micro-batch's logits records when its gradient arrives. With one stage no micro-batch's forward may start
before the previous micro-batch's backward is done (one micro-batch of activations alive at a time, as the FSDP
engine's gradient accumulation), and the gradients accumulate over all micro-batches.
"""

from __future__ import annotations

import pytest

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rollout_batch, run_on_ranks
from tests.workers.engine.megatron.helpers import megatron_actor

pytest.importorskip("megatron.core")


def _order_rank(rank, world, path, batch):
    from tensordict import TensorDict

    from verl.workers.engine.micro_batches import plan_micro_batches

    engine, _ = megatron_actor(path, tp=2)
    rows = TensorDict(batch, batch_size=[batch["input_ids"].shape[0]])
    micro_batches = plan_micro_batches(rows, None, True, 24).micro_batches
    events = []

    def step(index, packed, output):
        events.append(("forward", index))
        output.register_hook(lambda grad: events.append(("backward", index)))
        log_probs, _ = engine.log_probs(output, packed, 1.0, False)
        return -log_probs.sum(), None

    engine.zero_grad()
    engine.run(micro_batches, step, forward_only=False)
    grad_norm = sum(float(p.grad.norm()) for p in engine.params if p.grad is not None)
    return events, len(micro_batches), grad_norm


def test_single_stage_runs_each_backward_right_after_its_forward():
    batch = rollout_batch(batch_size=6, seed=1)
    results = run_on_ranks(_order_rank, 2, tiny_model_path("llama"), batch)
    for events, count, grad_norm in results:
        assert count >= 2  # a 24-token budget splits six rows of up to 11 tokens
        assert events == [(kind, index) for index in range(count) for kind in ("forward", "backward")]
        assert grad_norm > 0
