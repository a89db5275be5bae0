"""The ``hf`` manager copies nothing and restores the module's train/eval mode."""

import pytest
import torch

from verl.workers.sharding_manager import HFShardingManager


def test_switches_to_eval_and_restores_mode():
    module = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))
    manager = HFShardingManager(module)
    for initially_training in (True, False):
        module.train(initially_training)
        with manager:
            assert not module.training and not module[1].training
        assert module.training is initially_training
        assert manager.metrics["timing_s/update_weights"] == 0.0
        assert {"perf/rollout_memory_gb", "perf/training_memory_gb"} <= set(manager.metrics)


def test_generation_runs_compiled_layers_eagerly_and_training_compiled_again():
    """The actor's compiled decoder layers (``use_torch_compile``) run eagerly inside the manager: a decode step's
    cache changes their guards, and compiled generation recompiled layer after layer (149 s of one GPU step's
    generation). Outside it they compile as before."""
    from torch._dynamo.utils import counters

    from verl.workers.engine.fsdp.engine import compile_decoder_layers

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.relu(self.linear(x)) + x

    class Model(torch.nn.Sequential):
        _no_split_modules = ["Block"]  # what compile_decoder_layers compiles, as on an HF model

    module = Model(Block(), Block())
    compile_decoder_layers(module)
    torch._dynamo.reset()
    counters.clear()
    x = torch.randn(3, 4)
    manager = HFShardingManager(module)
    with manager:
        for length in (3, 5, 7):  # shapes change as in decoding
            eager = module(torch.randn(length, 4))
        assert eager.shape == (7, 4)
    assert counters["frames"]["total"] == 0  # nothing was compiled inside
    expected = x
    for layer in module:
        expected = torch.relu(layer.linear(expected)) + expected
    torch.testing.assert_close(module(x), expected)
    assert counters["frames"]["total"] > 0  # the layers compile again once the manager has left


def test_fsdp2_module_stays_gathered_through_generation_and_is_resharded_after(monkeypatch):
    """On an FSDP2 module the manager keeps the parameters gathered from the first decode forward to the last (FSDP2
    would reshard them after every forward and gather them again in the next, a collective per layer and token on
    more than one rank), generates what the plain module generates, and leaves the module sharded, in training
    mode, computing what the plain module computes."""
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    from tests.support.models import tiny_model_path
    from tests.workers.rollout.helpers import (
        PROMPTS,
        hf_greedy_reference,
        load_model,
        load_tokenizer,
        make_prompts,
        model_config,
        rollout_config,
    )
    from verl.utils.distributed import free_port
    from verl.workers.rollout.hf_rollout import HFRollout

    if dist.is_initialized():
        pytest.skip("needs its own 1-rank process group")
    path = tiny_model_path("llama")
    tokenizer = load_tokenizer(path)
    plain = load_model(path).eval()
    expected = hf_greedy_reference(plain, tokenizer, PROMPTS, max_new_tokens=8)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        sharded = load_model(path)
        sharded.load_state_dict(plain.state_dict())
        for layer in sharded.model.layers:
            fully_shard(layer)
        fully_shard(sharded)
        rollout = HFRollout(rollout_config("hf"), model_config(path), tokenizer, actor_module=sharded)
        layer_weight = sharded.model.layers[0].mlp.up_proj
        gathered_after_forward: list[bool] = []
        forward = rollout._forward

        def recording_forward(*args, **kwargs):
            logits = forward(*args, **kwargs)
            gathered_after_forward.append(not isinstance(layer_weight.weight, DTensor))
            return logits

        rollout._forward = recording_forward
        prompts = make_prompts(tokenizer, meta_info={"do_sample": False})
        sharded.eval()
        unmanaged = rollout.generate_sequences(prompts)
        assert not any(gathered_after_forward)  # FSDP2 alone reshards after each forward
        gathered_after_forward.clear()
        sharded.train()
        with HFShardingManager(sharded):
            managed = rollout.generate_sequences(prompts)
        assert len(gathered_after_forward) == 8 and all(gathered_after_forward)
        assert sharded.training
        assert all(isinstance(p, DTensor) for p in sharded.parameters())
        ids = torch.tensor([[1, 5, 9, 13]])
        torch.testing.assert_close(sharded(ids).logits, plain(ids).logits, rtol=1e-5, atol=1e-5)
    finally:
        dist.destroy_process_group()
    assert unmanaged.batch["responses"].tolist() == expected
    assert managed.batch["responses"].tolist() == expected
