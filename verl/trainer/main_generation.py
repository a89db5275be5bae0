"""Generate ``data.n_samples`` responses per prompt of a parquet file with a registered rollout backend.

    python -m verl.trainer.main_generation data.path=test.parquet data.output_path=gen.parquet \\
        data.n_samples=4 model.path=<hf model> rollout.name=vllm rollout.response_length=256

The output parquet holds the input rows plus ``responses``: a list of ``n_samples`` strings per row (special
tokens removed), ready for ``python -m verl.trainer.main_eval``.

The model is held by the FSDP2 engine and handed to the rollout through
:func:`verl.workers.rollout.build_rollout`, exactly as in RL training (``hf`` generates with it, ``vllm``
receives its weights). A world of one process runs in-process; ``trainer.nnodes * trainer.n_gpus_per_node > 1``
needs ``torchrun --nproc_per_node=...``, each rank generating an equal share of every batch.
"""

from __future__ import annotations

import os
from typing import Any

import hydra
import numpy as np
import torch
import torch.distributed as dist
from omegaconf import DictConfig

from verl.protocol import DataProto, pad_dataproto_to_divisor
from verl.trainer.config.generation import GenerationConfig
from verl.trainer.config.sft import validate_typed
from verl.trainer.sft.distributed import import_external_lib, init_distributed, resolve_device
from verl.utils.dataset.padding import left_pad


def prompt_messages(prompt: Any, prompt_key: str) -> list[dict[str, str]]:
    """A row's prompt as chat messages: a message list as is, a string as one user message."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, list | tuple | np.ndarray) and all(isinstance(m, dict) for m in prompt):
        return [{"role": m["role"], "content": m["content"]} for m in prompt]
    raise ValueError(f"data.prompt_key={prompt_key!r}: a prompt must be a string or a list of {{role, content}} dicts")


def tokenize_prompts(rows: list[dict], prompt_key: str, tokenizer, prompt_length: int) -> dict[str, torch.Tensor]:
    """Chat-templated prompts left-padded to ``prompt_length``: ``input_ids``, ``attention_mask``,
    ``position_ids``, each ``(len(rows), prompt_length)``."""
    columns: dict[str, list[torch.Tensor]] = {"input_ids": [], "attention_mask": [], "position_ids": []}
    for index, row in enumerate(rows):
        if prompt_key not in row:
            raise KeyError(f"data.prompt_key={prompt_key!r} is not a column of data.path (columns: {sorted(row)})")
        text = tokenizer.apply_chat_template(
            prompt_messages(row[prompt_key], prompt_key), add_generation_prompt=True, tokenize=False
        )
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) > prompt_length:
            raise ValueError(
                f"prompt of row {index} has {len(ids)} tokens, more than rollout.prompt_length={prompt_length}; "
                "raise rollout.prompt_length"
            )
        for key, tensor in zip(columns, left_pad(ids, prompt_length, tokenizer.pad_token_id), strict=True):
            columns[key].append(tensor)
    return {key: torch.stack(tensors) for key, tensors in columns.items()}


def decode_responses(output: DataProto, tokenizer) -> list[str]:
    """The text of each ``responses (rows, R)`` row up to its ``response_mask``, special tokens removed."""
    texts = []
    for ids, mask in zip(output.batch["responses"], output.batch["response_mask"], strict=True):
        texts.append(tokenizer.decode(ids[mask.bool()].tolist(), skip_special_tokens=True))
    return texts


class Generator:
    """The engine-held model and its rollout; :meth:`generate` turns prompt rows into ``n`` texts per row."""

    def __init__(self, config: GenerationConfig, tokenizer):
        from verl.workers.engine.fsdp.engine import FSDPEngine
        from verl.workers.rollout import build_rollout

        self.config = config
        self.tokenizer = tokenizer
        self.world_size = dist.get_world_size()
        self.engine = FSDPEngine(config.model, config.actor.fsdp_config, None, role="ref").initialize()
        self.rollout, self.sharding_manager = build_rollout(config.rollout, config.model, tokenizer, self.engine.module)

    def _generate_share(self, rows: list[dict]) -> list[str]:
        """``len(rows) * n`` texts, prompt i's samples contiguous (each rank generates an equal share)."""
        tensors = tokenize_prompts(rows, self.config.data.prompt_key, self.tokenizer, self.config.rollout.prompt_length)
        meta_info = {"eos_token_id": self.tokenizer.eos_token_id, "pad_token_id": self.tokenizer.pad_token_id, "n": 1}
        # n copies of each prompt, one sample each (also right for greedy decoding, which samples once per row)
        batch = DataProto.from_dict(tensors=tensors, meta_info=meta_info).repeat(self.config.data.n_samples)
        batch, pad_size = pad_dataproto_to_divisor(batch, self.world_size)
        share = batch.chunk(self.world_size)[dist.get_rank()]
        output = self.sharding_manager.postprocess_data(
            self.rollout.generate_sequences(self.sharding_manager.preprocess_data(share))
        )
        texts: list[Any] = [None] * self.world_size
        dist.all_gather_object(texts, decode_responses(output, self.tokenizer))
        flat = [text for part in texts for text in part]
        return flat[: len(flat) - pad_size]

    def generate(self, rows: list[dict]) -> list[list[str]]:
        """``n_samples`` responses for every row, in ``data.batch_size`` batches."""
        n = self.config.data.n_samples
        responses: list[list[str]] = []
        with self.sharding_manager:
            for start in range(0, len(rows), self.config.data.batch_size):
                texts = self._generate_share(rows[start : start + self.config.data.batch_size])
                responses.extend(texts[i : i + n] for i in range(0, len(texts), n))
                if dist.get_rank() == 0:
                    print(f"generated {len(responses)}/{len(rows)} prompts", flush=True)
        return responses

    def close(self) -> None:
        """Stop the rollout engine (vLLM tears down its process groups) before the world is destroyed."""
        shutdown = getattr(self.rollout, "shutdown", None)
        if callable(shutdown):
            shutdown()


def write_output(table, responses: list[list[str]], output_path: str) -> None:
    """``table`` plus the ``responses`` column, written atomically to ``output_path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if "responses" in table.column_names:
        table = table.drop(["responses"])
    table = table.append_column("responses", pa.array(responses, type=pa.list_(pa.string())))
    os.makedirs(os.path.dirname(os.path.abspath(output_path)), exist_ok=True)
    tmp = output_path + ".tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, output_path)


def run_generation(config: DictConfig | GenerationConfig) -> str:
    """Validate, generate, write the output parquet (rank 0); returns ``data.output_path``."""
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    config = validate_typed(config, GenerationConfig)
    from verl.trainer.config.validation import ConfigError
    from verl.workers.rollout.registry import ROLLOUT_REGISTRY

    if (error := ROLLOUT_REGISTRY.error(config.rollout.name, "rollout.name")) is not None:
        raise ConfigError([error])
    data_path = os.path.expanduser(config.data.path)
    output_path = os.path.expanduser(config.data.output_path)
    if not os.path.isfile(data_path):
        raise FileNotFoundError(f"data.path={config.data.path!r} does not exist")
    device = resolve_device(config.trainer.device)
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    _, world_size = init_distributed(device)
    expected = config.trainer.nnodes * config.trainer.n_gpus_per_node
    if world_size != expected:
        raise RuntimeError(
            f"trainer.nnodes * trainer.n_gpus_per_node = {expected} but {world_size} process(es) were launched; "
            f"launch with torchrun --nproc_per_node={expected} or set trainer.n_gpus_per_node={world_size}"
        )
    config.model.path = config.model.local_path
    import_external_lib(config.model.external_lib)
    tokenizer = AutoTokenizer.from_pretrained(
        config.model.local_tokenizer_path, trust_remote_code=config.model.trust_remote_code
    )
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    table = pq.read_table(data_path)
    if config.data.max_samples > 0:
        table = table.slice(0, config.data.max_samples)
    generator = Generator(config, tokenizer)
    try:
        responses = generator.generate(table.to_pylist())
        if dist.get_rank() == 0:
            write_output(table, responses, output_path)
            print(f"wrote {len(responses)} rows x {config.data.n_samples} responses to {output_path}")
        dist.barrier()
    finally:
        generator.close()  # vLLM's shutdown also tears down the torch.distributed world
    return output_path


@hydra.main(config_path="config", config_name="generation", version_base=None)
def main(config: DictConfig) -> None:
    try:
        run_generation(config)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
