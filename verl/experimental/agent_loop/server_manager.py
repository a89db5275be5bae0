"""``AsyncLLMServerManager``: the agent loops' client of the inference servers (one per agent-loop worker).

Load balancing sends a new trajectory to the replica with the fewest requests so far; sticky sessions send every
later turn of the same trajectory (same ``request_id``) to the same replica, whose prefix cache still holds the
conversation so far. Each call is one request to the replica leader's ``generate`` (a Ray actor method).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from verl.workers.rollout.async_server import TokenOutput


@dataclass(frozen=True)
class ServerHandle:
    """One replica: the Ray actor of its tensor-parallel leader and the name of its ``generate`` method there."""

    actor: Any
    method_name: str
    replica_rank: int

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str) -> TokenOutput:
        return await getattr(self.actor, self.method_name).remote(prompt_ids, sampling_params, request_id)


@dataclass(frozen=True)
class LocalServerHandle:
    """A server in this process (scripts and tests without Ray): calls run in the event loop's thread pool."""

    server: Any
    replica_rank: int = 0

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str) -> TokenOutput:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.server.generate, prompt_ids, sampling_params, request_id)


class AsyncLLMServerManager:
    """Least-requests load balancing with sticky sessions over ``server_handles``."""

    def __init__(self, config: Any, server_handles: list[Any], max_cache_size: int = 10000):
        if not server_handles:
            raise ValueError("AsyncLLMServerManager needs at least one server handle")
        self.config = config
        self.server_handles = list(server_handles)
        self.max_cache_size = max_cache_size
        tie_break = itertools.count()
        # heap of [requests sent, tie-break, replica index]: the least-used replica is at the top
        self._load = [[0, next(tie_break), index] for index in range(len(self.server_handles))]
        self._sessions: OrderedDict[str, int] = OrderedDict()

    def choose_server(self, request_id: str) -> ServerHandle:
        """The replica of ``request_id``'s session, or for a new session the one with the fewest requests."""
        if request_id in self._sessions:
            self._sessions.move_to_end(request_id)
            return self.server_handles[self._sessions[request_id]]
        entry = self._load[0]
        entry[0] += 1
        heapq.heapreplace(self._load, entry)
        self._sessions[request_id] = entry[2]
        if len(self._sessions) > self.max_cache_size:
            self._sessions.popitem(last=False)
        return self.server_handles[entry[2]]

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: Any = None,
    ) -> TokenOutput:
        """One model turn continuing ``prompt_ids`` on the session's replica."""
        if image_data is not None:
            raise NotImplementedError("image inputs are not supported by the agent loop of this build")
        server = self.choose_server(request_id)
        return await server.generate(list(prompt_ids), dict(sampling_params), request_id)
