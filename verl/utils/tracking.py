"""Experiment tracking: one ``Tracking`` object fans each step's metrics out to the backends in ``trainer.logger``.

Backends are looked up in a registry (``register_logger``). ``console`` prints a one-line summary per step,
``file`` appends jsonl, and ``tensorboard``, ``wandb`` (``WANDB_MODE=offline`` works without network),
``mlflow`` (a local store unless ``MLFLOW_TRACKING_URI`` says otherwise) and ``swanlab`` need their packages,
installed together by ``pip install 'verl[logging]'``. ``check_backends`` runs before anything starts, so a
missing package or an unknown name fails in seconds.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from verl.utils.registry import Registry

__all__ = ["Tracking", "Logger", "register_logger", "check_backends", "available_loggers", "LOGGER_REGISTRY"]


class Logger(Protocol):
    """What a ``trainer.logger`` backend implements; a factory registered with :func:`register_logger` returns one."""

    def log(self, data: dict[str, Any], step: int) -> None: ...

    def finish(self) -> None: ...


LOGGER_REGISTRY: Registry[Callable[[str, str, dict], Logger]] = Registry(
    "logger", "trainer.logger", package="verl.utils.tracking", decorator="register_logger"
)
"""name -> factory ``fn(project_name, experiment_name, config_dict) -> Logger``; ``info(name)["requires"]`` is the
module the backend needs."""


def register_logger(name: str, requires: str | None = None):
    """Register a logger factory ``fn(project_name, experiment_name, config_dict) -> Logger`` under ``name``.

    ``requires`` names the importable module the backend needs; its absence fails in ``check_backends``.
    """
    return LOGGER_REGISTRY.register(name, requires=requires)


def available_loggers() -> list[str]:
    return LOGGER_REGISTRY.names()


def _as_list(backends: str | Iterable[str] | None) -> list[str]:
    if backends is None:
        return []
    if isinstance(backends, str):
        return [backends]
    return list(backends)


def check_backends(backends: str | Iterable[str] | None) -> list[str]:
    """Fail with a clear message if a backend name is unknown or its package is not installed."""
    names = _as_list(backends)
    for name in names:
        if name not in LOGGER_REGISTRY:
            raise ValueError(f"trainer.logger: unknown logger {name!r}; registered loggers are {available_loggers()}.")
        module = LOGGER_REGISTRY.info(name).get("requires")
        if module is not None and importlib.util.find_spec(module.split(".")[0]) is None:
            raise ImportError(
                f"trainer.logger includes {name!r} but the package {module.split('.')[0]!r} is not installed. "
                f"Install the logging extra: pip install 'verl[logging]' (or remove {name!r} from trainer.logger)."
            )
    return names


def _plain(config: Any) -> dict:
    """Config as a plain dict for backends that record hyper-parameters."""
    if config is None:
        return {}
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(config, DictConfig):
            return OmegaConf.to_container(config, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf is a dependency
        pass
    return dict(config)


def _scalar(value: Any) -> float | None:
    """A float for numbers and 0-d tensors / arrays; None for anything else."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    return None


def _fmt(value: float) -> str:
    if value == 0 or math.isnan(value) or math.isinf(value):
        return f"{value}"
    if abs(value) >= 1000 or abs(value) < 1e-3:
        return f"{value:.3e}"
    return f"{value:.4g}"


class ConsoleLogger:
    """Per step, verl's metric line ``step:N - critic/score/mean:0.250 - actor/pg_loss:-0.012 - ...`` (every scalar
    metric under its verl key, sorted, so log parsers written for verl work), then a compact progress line of the
    headline metrics."""

    HEADLINE = (
        ("critic/score/mean", "score"),
        ("critic/rewards/mean", "reward"),
        ("actor/pg_loss", "pg_loss"),
        ("actor/entropy", "entropy"),
        ("actor/ppo_kl", "ppo_kl"),
        ("actor/kl_loss", "kl_loss"),
        ("actor/grad_norm", "grad_norm"),
        ("critic/vf_loss", "vf_loss"),
        ("response_length/mean", "resp_len"),
        ("response_length/clip_ratio", "resp_clip"),
        ("perf/throughput", "tok/s"),
        ("timing_s/step", "step_s"),
        ("train/loss", "loss"),
        ("val/loss", "val_loss"),
    )

    def __init__(self, stream=None):
        self.stream = stream

    @staticmethod
    def metric_line(data: dict[str, Any], step: int) -> str:
        """verl's console format: ``step:N`` then ``key:value`` for every scalar metric (floats to 3 decimals)."""
        parts = [f"step:{step}"]
        for key in sorted(data):
            value = _scalar(data[key])
            if value is None:
                continue
            is_integral = isinstance(data[key], int | bool) and not isinstance(data[key], float)
            parts.append(f"{key}:{int(value)}" if is_integral else f"{key}:{value:.3f}")
        return " - ".join(parts)

    def progress_line(self, data: dict[str, Any], step: int) -> str:
        """The compact line: headline metrics under short labels, then the ``val-core/`` results."""
        parts = [f"step {step}"]
        for key, label in self.HEADLINE:
            if key in data and _scalar(data[key]) is not None:
                parts.append(f"{label} {_fmt(_scalar(data[key]))}")
        for key in sorted(data):
            if key.startswith("val-core/") and _scalar(data[key]) is not None:
                parts.append(f"{key} {_fmt(_scalar(data[key]))}")
        return " | ".join(parts)

    def log(self, data: dict[str, Any], step: int) -> None:
        stream = self.stream or sys.stdout
        print(self.metric_line(data, step), file=stream, flush=True)
        print(self.progress_line(data, step), file=stream, flush=True)

    def finish(self) -> None:
        pass


class FileLogger:
    """Appends ``{"step": step, "data": {...}}`` per call to a jsonl file.

    Path: ``$VERL_FILE_LOGGER_PATH`` if set, else ``$VERL_FILE_LOGGER_ROOT`` (default ``metrics``)
    ``/{project}/{experiment}.jsonl``.
    """

    def __init__(self, project_name: str, experiment_name: str):
        path = os.environ.get("VERL_FILE_LOGGER_PATH")
        if path is None:
            root = os.environ.get("VERL_FILE_LOGGER_ROOT", "metrics")
            path = os.path.join(root, project_name, f"{experiment_name}.jsonl")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in finish()

    def log(self, data: dict[str, Any], step: int) -> None:
        record = {key: (_scalar(value) if _scalar(value) is not None else str(value)) for key, value in data.items()}
        self._file.write(json.dumps({"step": step, "data": record}) + "\n")
        self._file.flush()

    def finish(self) -> None:
        if not self._file.closed:
            self._file.close()


class _TensorboardLogger:
    def __init__(self, project_name: str, experiment_name: str):
        from torch.utils.tensorboard import SummaryWriter

        log_dir = os.environ.get("TENSORBOARD_DIR", os.path.join("tensorboard_log", project_name, experiment_name))
        self.writer = SummaryWriter(log_dir=log_dir)

    def log(self, data: dict[str, Any], step: int) -> None:
        for key, value in data.items():
            if _scalar(value) is not None:
                self.writer.add_scalar(key, _scalar(value), step)
        self.writer.flush()

    def finish(self) -> None:
        self.writer.close()


class _WandbLogger:
    def __init__(self, project_name: str, experiment_name: str, config: dict):
        import wandb

        self.wandb = wandb
        self.run = wandb.init(project=project_name, name=experiment_name, config=config)

    def log(self, data: dict[str, Any], step: int) -> None:
        self.run.log({key: value for key, value in data.items() if _scalar(value) is not None}, step=step)

    def finish(self) -> None:
        self.run.finish()


class _MlflowLogger:
    """MLflow metric names may not contain ``@``: ``mean@4`` is logged as ``mean_at_4``."""

    def __init__(self, project_name: str, experiment_name: str, config: dict):
        import mlflow

        self.mlflow = mlflow
        mlflow.set_tracking_uri(os.environ.get("MLFLOW_TRACKING_URI", f"file:{os.path.abspath('mlruns')}"))
        mlflow.set_experiment(project_name)
        mlflow.start_run(run_name=experiment_name)
        flat = _flatten(config)
        mlflow.log_params({key: str(value)[:500] for key, value in flat.items()})

    def log(self, data: dict[str, Any], step: int) -> None:
        metrics = {}
        for key, value in data.items():
            if _scalar(value) is not None:
                metrics[re.sub(r"[^\w\-\. /]", "_", key.replace("@", "_at_"))] = _scalar(value)
        self.mlflow.log_metrics(metrics, step=step)

    def finish(self) -> None:
        self.mlflow.end_run()


class _SwanlabLogger:
    def __init__(self, project_name: str, experiment_name: str, config: dict):
        import swanlab

        self.swanlab = swanlab
        swanlab.init(
            project=project_name,
            experiment_name=experiment_name,
            config=config,
            logdir=os.environ.get("SWANLAB_LOG_DIR", "swanlog"),
            mode=os.environ.get("SWANLAB_MODE", "cloud"),
        )

    def log(self, data: dict[str, Any], step: int) -> None:
        self.swanlab.log({key: value for key, value in data.items() if _scalar(value) is not None}, step=step)

    def finish(self) -> None:
        self.swanlab.finish()


def _flatten(config: dict, prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(_flatten(value, name))
        else:
            flat[name] = value
    return flat


register_logger("console")(lambda project, experiment, config: ConsoleLogger())
register_logger("file")(lambda project, experiment, config: FileLogger(project, experiment))
register_logger("tensorboard", requires="tensorboard")(
    lambda project, experiment, config: _TensorboardLogger(project, experiment)
)
register_logger("wandb", requires="wandb")(_WandbLogger)
register_logger("mlflow", requires="mlflow")(_MlflowLogger)
register_logger("swanlab", requires="swanlab")(_SwanlabLogger)


class Tracking:
    """Fan-out of metrics to the configured backends (verl's ``Tracking``)."""

    def __init__(
        self,
        project_name: str,
        experiment_name: str,
        default_backend: str | list[str] = "console",
        config: Any = None,
    ):
        self.backends = check_backends(default_backend)
        plain_config = _plain(config)
        self.logger: dict[str, Logger] = {}
        for name in self.backends:
            factory = LOGGER_REGISTRY.get(name)
            self.logger[name] = factory(project_name, experiment_name, plain_config)

    def log(self, data: dict[str, Any], step: int, backend: str | list[str] | None = None) -> None:
        """Send ``data`` to every backend (or only those named in ``backend``)."""
        selected = _as_list(backend)
        for name, logger in self.logger.items():
            if not selected or name in selected:
                logger.log(data=data, step=step)

    def finish(self) -> None:
        for logger in self.logger.values():
            logger.finish()
        self.logger = {}

    def __del__(self):
        try:
            self.finish()
        except Exception:  # noqa: BLE001 - interpreter shutdown may have torn modules down
            pass
