"""Where the judge model runs: :class:`JudgeServer` (one engine, usable in-process) and :class:`RemoteJudge`
(``reward_model.num_workers`` servers as Ray actors, shared by the run's reward functions).

The Ray actors are named after the judge's settings and created with ``get_if_exists``, so the training and the
validation reward functions share them. A call that must be abandoned (timeout) kills the actors with
``no_restart=False``: Ray restarts them (the model is loaded again) and the next call goes to the fresh ones.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from verl.workers.reward_model.judge.engines import get_judge_engine_cls


class JudgeServer:
    """The judge model behind an engine of ``reward_model.rollout.name``; renders chats with its chat template."""

    def __init__(
        self, model_path: str, rollout_config: Any, trust_remote_code: bool = False, external_lib: str | None = None
    ):
        from verl.workers.config.model import resolve_model_path
        from verl.workers.reward_model.role import import_external_lib, load_tokenizer

        import_external_lib(external_lib)
        path = resolve_model_path(model_path)
        self.tokenizer = load_tokenizer(path, trust_remote_code)
        self.prompt_length = int(rollout_config.prompt_length)
        self.engine = get_judge_engine_cls(rollout_config.name)(path, rollout_config, self.tokenizer, trust_remote_code)

    def prompt_ids(self, chat: list[dict[str, str]]) -> list[int]:
        """Token ids of ``chat`` rendered with the judge's chat template and the assistant's turn opened."""
        text = self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def judge(self, chats: list[list[dict[str, str]]]) -> list[str | None]:
        """One judgment per chat; None for a chat longer than ``rollout.prompt_length`` tokens (not generated)."""
        ids = [self.prompt_ids(chat) for chat in chats]
        fitting = [i for i, row in enumerate(ids) if len(row) <= self.prompt_length]
        texts = self.engine.generate([ids[i] for i in fitting]) if fitting else []
        out: list[str | None] = [None] * len(chats)
        for i, text in zip(fitting, texts):
            out[i] = text
        return out

    def ready(self) -> bool:
        return True


def _settings_tag(model_path: str, rollout_config: Any) -> str:
    """Short hash of what the judge actors load, so that different judges in one Ray session never mix."""
    to_dict = getattr(rollout_config, "to_dict", None)
    settings = to_dict() if to_dict is not None else dict(rollout_config)
    blob = json.dumps({"path": model_path, "rollout": settings}, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:10]


class RemoteJudge:
    """``num_workers`` :class:`JudgeServer` Ray actors; a batch of chats is split evenly over them."""

    def __init__(
        self,
        model_path: str,
        rollout_config: Any,
        num_workers: int = 1,
        trust_remote_code: bool = False,
        external_lib: str | None = None,
    ):
        self.model_path = model_path
        self.rollout_config = rollout_config
        self.num_workers = int(num_workers)
        self.trust_remote_code = trust_remote_code
        self.external_lib = external_lib
        self.name_prefix = f"verl_judge_{_settings_tag(model_path, rollout_config)}_"
        self._actors: list | None = None

    def _actor_options(self) -> dict[str, Any]:
        import ray

        gpus = int(self.rollout_config.tensor_model_parallel_size) if ray.cluster_resources().get("GPU", 0) else 0
        # on CPU the judge takes no logical CPU: the training pool's placement groups may hold all of them
        return {"num_cpus": 0 if not gpus else 1, "num_gpus": gpus, "max_restarts": -1, "max_task_retries": 0}

    def start(self) -> RemoteJudge:
        """Create (or find) the actors and wait until their models are loaded."""
        import ray

        if self._actors is None:
            server = ray.remote(JudgeServer)
            options = self._actor_options()
            self._actors = [
                server.options(name=f"{self.name_prefix}{i}", get_if_exists=True, **options).remote(
                    self.model_path, self.rollout_config, self.trust_remote_code, self.external_lib
                )
                for i in range(self.num_workers)
            ]
            ray.get([actor.ready.remote() for actor in self._actors])
        return self

    def judge(self, chats: list[list[dict[str, str]]]) -> list[str | None]:
        """One judgment per chat (None: longer than ``rollout.prompt_length``); waits out an actor restart once."""
        import ray

        try:
            return self._judge_once(chats)
        except ray.exceptions.ActorUnavailableError:  # restarting after cancel(): wait for the reload, try again
            self._wait_until_ready()
            return self._judge_once(chats)

    def _judge_once(self, chats: list[list[dict[str, str]]]) -> list[str | None]:
        import ray

        actors = self.start()._actors
        size = -(-len(chats) // len(actors))
        parts = [chats[i : i + size] for i in range(0, len(chats), size)]
        results = ray.get([actor.judge.remote(part) for actor, part in zip(actors, parts)])
        return [text for part in results for text in part]

    def _wait_until_ready(self, poll_s: float = 1.0) -> None:
        import ray

        for actor in self._actors or []:
            while True:
                try:
                    ray.get(actor.ready.remote())
                    break
                except ray.exceptions.ActorUnavailableError:
                    time.sleep(poll_s)

    def cancel(self) -> None:
        """Abandon the calls in flight: kill the actors, letting Ray restart them with the model reloaded."""
        import ray

        for actor in self._actors or []:
            ray.kill(actor, no_restart=False)
