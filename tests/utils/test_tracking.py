"""Tracking backends available here (console, file), the registry errors, and the missing-extra message."""

from __future__ import annotations

import importlib.util
import json

import pytest

from verl.utils.tracking import LOGGER_REGISTRY, Tracking, check_backends

OPTIONAL_BACKENDS = ["tensorboard", "wandb", "mlflow", "swanlab"]


def test_console_prints_verl_metric_keys_and_the_progress_line(capsys):
    tracking = Tracking("proj", "exp", default_backend="console")
    tracking.log({"critic/score/mean": 0.25, "actor/pg_loss": -0.125, "timing_s/step": 3.5, "other/x": 1.0}, step=3)
    tracking.log({"critic/score/mean": 0.5, "val-core/arithmetic/reward/mean@1": 0.75, "text": "skipped"}, step=4)
    tracking.finish()
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [
        "step:3 - actor/pg_loss:-0.125 - critic/score/mean:0.250 - other/x:1.000 - timing_s/step:3.500",
        "step 3 | score 0.25 | pg_loss -0.125 | step_s 3.5",
        "step:4 - critic/score/mean:0.500 - val-core/arithmetic/reward/mean@1:0.750",
        "step 4 | score 0.5 | val-core/arithmetic/reward/mean@1 0.75",
    ]


def test_console_metric_line_parses_back_to_the_metrics(capsys):
    """A parser written for verl's console output (split on ' - ', then on the first ':') finds every metric."""
    metrics = {"critic/score/mean": 0.5, "actor/pg_loss": -0.25, "response_length/mean": 12.0, "training/epoch": 2}
    Tracking("proj", "exp", default_backend="console").log(metrics, step=7)
    line = capsys.readouterr().out.splitlines()[0]
    fields = dict(part.split(":", 1) for part in line.split(" - "))
    assert fields.pop("step") == "7"
    assert {key: float(value) for key, value in fields.items()} == metrics


def test_file_backend_writes_jsonl(tmp_path, monkeypatch):
    path = tmp_path / "run" / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    tracking = Tracking("proj", "exp", default_backend=["file"])
    tracking.log({"a": 1, "b": 0.5}, step=1)
    tracking.log({"a": 2}, step=2)
    tracking.finish()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records == [{"step": 1, "data": {"a": 1.0, "b": 0.5}}, {"step": 2, "data": {"a": 2.0}}]


def test_file_backend_default_path_and_backend_filter(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path))
    tracking = Tracking("proj", "exp", default_backend=["console", "file"])
    tracking.log({"x": 1.0}, step=1, backend="file")
    tracking.finish()
    assert capsys.readouterr().out == ""
    assert json.loads((tmp_path / "proj" / "exp.jsonl").read_text()) == {"step": 1, "data": {"x": 1.0}}


def test_unknown_backend_lists_registered():
    with pytest.raises(ValueError, match=r"unknown logger 'tensorbord'.*console.*file"):
        check_backends(["console", "tensorbord"])


@pytest.mark.parametrize("backend", OPTIONAL_BACKENDS)
def test_missing_package_names_the_logging_extra(backend):
    module = LOGGER_REGISTRY.info(backend)["requires"]
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed here")
    with pytest.raises(ImportError, match=r"pip install 'verl\[logging\]'"):
        Tracking("proj", "exp", default_backend=["console", backend])


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None, reason="tensorboard not installed")
def test_tensorboard_writes_event_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORBOARD_DIR", str(tmp_path))
    tracking = Tracking("proj", "exp", default_backend="tensorboard")
    tracking.log({"a": 1.0}, step=1)
    tracking.finish()
    assert any(p.name.startswith("events.out.tfevents") for p in tmp_path.iterdir())


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="wandb not installed")
def test_wandb_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    tracking = Tracking("proj", "exp", default_backend="wandb", config={"lr": 1e-3})
    tracking.log({"a": 1.0}, step=1)
    tracking.finish()
    assert any((tmp_path / "wandb").glob("offline-run-*"))


@pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="mlflow not installed")
def test_mlflow_local_store(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"file:{tmp_path}")
    tracking = Tracking("proj", "exp", default_backend="mlflow", config={"lr": 1e-3})
    tracking.log({"val-core/ds/reward/mean@4": 0.5}, step=1)
    tracking.finish()
    assert list(tmp_path.rglob("mean_at_4"))
