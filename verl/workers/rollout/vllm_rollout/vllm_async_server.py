"""``AsyncvLLMServer``: continuous batching of single requests on the in-process ``vllm.LLM`` of the hybrid engine.

vLLM's own ``AsyncLLM`` always runs its engine core in a separate process (vLLM 0.32 raises for asyncio without
multiprocessing), which cannot share the worker's weights or its ``external_launcher`` process group. So the
server drives the same in-process engine the ``sync`` rollout uses, from a serving thread::

    loop:  take the requests that arrived -> engine.add_request(...) -> engine.step() -> resolve finished ones

Requests arrive from any thread (the worker's ``generate`` calls run in a Ray concurrency group); each waits on a
future. With tensor parallelism every rank of the group must add the same requests and step in lockstep
(``external_launcher``): the leader broadcasts each iteration's new requests (and the stop signal) to its peers
over the group's CPU process group, and the peers step with it.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import Future
from typing import Any

import torch
import torch.distributed as dist

from verl.workers.rollout.async_server import (
    AsyncRolloutServer,
    TokenOutput,
    check_sampling_params,
    register_async_server,
)
from verl.workers.rollout.sampling import resolve_special_ids, vision_placeholder_bias


def _tp_group() -> tuple[int, int, Any, int]:
    """``(rank_in_group, group_size, cpu_group, leader_global_rank)`` of this worker's tensor-parallel group."""
    from vllm.distributed import parallel_state

    group = parallel_state.get_tp_group()
    return group.rank_in_group, group.world_size, group.cpu_group, group.ranks[0]


@register_async_server("vllm")
class AsyncvLLMServer(AsyncRolloutServer):
    """Serves ``rollout.inference_engine`` (a ``vllm.LLM``) request by request; see the module docstring."""

    def __init__(self, rollout: Any) -> None:
        super().__init__(rollout)
        self.llm = rollout.inference_engine
        self.engine = self.llm.llm_engine
        self.tp_rank, self.tp_size, self.tp_cpu_group, self.leader_rank = _tp_group()
        self.eos_token_ids, _ = resolve_special_ids({}, rollout.tokenizer, rollout.generation_eos)
        self.max_model_len = int(rollout.max_model_len)
        self.ignore_eos = rollout.config.ignore_eos
        self.logit_bias = vision_placeholder_bias(rollout.hf_config) or None
        """A vision-language model's image/video placeholder ids, never sampled (as in the sync rollout)."""
        self._condition = threading.Condition()
        self._inbox: list[tuple[str, list[int], Any]] = []
        self._futures: dict[str, Future] = {}
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._counter = itertools.count()

    @property
    def is_leader(self) -> bool:
        return self.tp_rank == 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("AsyncvLLMServer.start: already serving (sleep before waking up again)")
        self._stopping, self._error = False, None
        # the serving thread must run on the engine's device (a new thread starts on CUDA device 0)
        device = torch.cuda.current_device() if torch.cuda.is_available() else None
        self._thread = threading.Thread(target=self._serve, args=(device,), name="vllm-async-server", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
        self._thread.join()
        self._thread = None
        if self._error is not None:
            raise RuntimeError("the vLLM serving loop failed") from self._error

    # ------------------------------------------------------------------ requests

    def sampling_params(self, sampling_params: dict[str, Any], prompt_length: int):
        """``vllm.SamplingParams`` of one turn: the agent loop's values, EOS stops, the engine log-prob of each
        sampled token (unless ``logprobs`` is False), at most ``max_model_len - prompt_length`` new tokens, and a
        vision-language model's placeholder ids banned (``logit_bias``)."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        check_sampling_params(sampling_params)
        values = {key: value for key, value in sampling_params.items() if key != "logprobs" and value is not None}
        room = self.max_model_len - prompt_length
        if room <= 0:
            raise ValueError(
                f"a prompt of {prompt_length} tokens leaves no room in rollout.max_model_len={self.max_model_len}"
            )
        values["max_tokens"] = min(int(values.get("max_tokens", room)), room)
        if int(values.get("top_k", -1)) <= 0:
            values["top_k"] = -1
        return SamplingParams(
            **values,
            stop_token_ids=[] if self.ignore_eos else list(self.eos_token_ids),
            ignore_eos=self.ignore_eos,
            logprobs=0 if sampling_params.get("logprobs", True) else None,
            logit_bias=self.logit_bias,
            detokenize=False,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )

    def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str) -> TokenOutput:
        if not self.is_leader:
            raise RuntimeError("generate goes to the first rank of a tensor-parallel group (the replica's leader)")
        params = self.sampling_params(sampling_params, len(prompt_ids))
        future: Future = Future()
        engine_id = f"{request_id}-{next(self._counter)}"  # one agent loop reuses its id across turns
        with self._condition:
            if self._error is not None:
                raise RuntimeError("the vLLM serving loop failed; see the cause") from self._error
            if self._thread is None or self._stopping:
                raise RuntimeError("the rollout server is not serving: wake_up the worker group first")
            self._futures[engine_id] = future
            self._inbox.append((engine_id, list(prompt_ids), params))
            self._condition.notify_all()
        return future.result()

    # ------------------------------------------------------------------ serving thread

    def _next_message(self) -> tuple[list[tuple[str, list[int], Any]], bool]:
        """Leader: wait for work, then take the new requests and whether to stop; peers: receive the leader's."""
        if self.is_leader:
            with self._condition:
                while not self._inbox and not self._stopping and not self.engine.has_unfinished_requests():
                    self._condition.wait()
                new, self._inbox = self._inbox, []
                stop = self._stopping and not new and not self.engine.has_unfinished_requests()
            message = [(new, stop)]
        else:
            message = [None]
        if self.tp_size > 1:
            dist.broadcast_object_list(message, src=self.leader_rank, group=self.tp_cpu_group)
        return message[0]

    def _serve(self, device: int | None) -> None:
        try:
            if device is not None:
                torch.cuda.set_device(device)
            while True:
                new, stop = self._next_message()
                if stop:
                    return
                for engine_id, prompt_ids, params in new:
                    self.engine.add_request(engine_id, {"prompt_token_ids": prompt_ids}, params)
                if self.engine.has_unfinished_requests():
                    for output in self.engine.step():
                        if output.finished and self.is_leader:
                            self._resolve(output)
        except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
            self._error = exc
            with self._condition:
                pending, self._futures = self._futures, {}
                self._stopping = True
            for future in pending.values():
                future.set_exception(exc)

    def _resolve(self, output: Any) -> None:
        completion = output.outputs[0]
        tokens = list(completion.token_ids)
        log_probs = None
        if completion.logprobs is not None:
            log_probs = [step[token].logprob for step, token in zip(completion.logprobs, tokens)]
        future = self._futures.pop(self._external_id(output.request_id), None)
        if future is not None:
            future.set_result(TokenOutput(token_ids=tokens, log_probs=log_probs, stop_reason=completion.finish_reason))

    def _external_id(self, request_id: str) -> str:
        """vLLM appends a random suffix to request ids in some versions; map back to the id we added."""
        if request_id in self._futures:
            return request_id
        return request_id.rsplit("-", 1)[0]
