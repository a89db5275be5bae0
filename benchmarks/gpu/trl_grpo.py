"""TRL's ``GRPOTrainer`` on the GRPO benchmark's workload, for the step-time ratio against verl.

Workload: the training parquet's GSM8K prompts (the same chat messages verl's dataset templates), 32 prompts x
``--n`` 8 samples x up to 256 tokens, one optimizer step per batch (``per_device_train_batch_size`` 32 sequences x
8 accumulation steps = the 256-sequence generation batch), learning rate 1e-6, verl's GSM8K scorer as the reward.
Everything else is TRL's default (transformers ``generate``, ``beta=0``: no reference model). Prints one JSON line
per optimizer step (``{"run": "trl", "step": k, "step_s": ...}``) and a summary line.

Usage: ``python -m benchmarks.gpu.trl_grpo --model DIR --data train.parquet [--steps 6]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time


def gsm8k_reward(completions, ground_truth, **kwargs) -> list[float]:
    """verl's GSM8K rule (strict ``#### <number>``), on TRL's conversational completions."""
    from verl.utils.reward_score.gsm8k import compute_score

    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float(compute_score(text, truth)) for text, truth in zip(texts, ground_truth)]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--micro-batch", type=int, default=32)
    args = parser.parse_args(argv)

    import pyarrow.parquet as pq
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    rows = pq.read_table(args.data).to_pylist()
    dataset = Dataset.from_list(
        [{"prompt": row["prompt"], "ground_truth": row["reward_model"]["ground_truth"]} for row in rows]
    )
    sequences = args.prompts * args.n
    records: list[dict] = []

    class StepTimer(TrainerCallback):
        def on_train_begin(self, *_, **__):
            self.last = time.perf_counter()

        def on_step_end(self, _args, state, *_, **__):
            now = time.perf_counter()
            record = {"run": "trl", "step": state.global_step, "step_s": now - self.last}
            self.last = now
            records.append(record)
            print(json.dumps(record), flush=True)

        def on_log(self, _args, state, _control, logs=None, **__):
            if records and logs:
                records[-1].update({f"trl/{k}": v for k, v in logs.items() if isinstance(v, int | float)})

    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-grpo-"),
        per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=sequences // args.micro_batch,
        num_generations=args.n,
        max_completion_length=args.max_tokens,
        learning_rate=1e-6,
        max_steps=args.steps,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=1,
        use_cpu=not torch.cuda.is_available(),  # a CPU smoke run; the benchmark runs on a GPU
    )
    trainer = GRPOTrainer(
        model=args.model, reward_funcs=gsm8k_reward, args=config, train_dataset=dataset, callbacks=[StepTimer()]
    )
    trainer.train()
    steady = [r["step_s"] for r in records[1:]] or [r["step_s"] for r in records]
    summary = {"run": "trl", "summary": True, "mean_step_s": sum(steady) / len(steady), "steps": len(records)}
    print(json.dumps(summary), flush=True)
    return records


if __name__ == "__main__":
    main()
