"""AsyncLLMServerManager: new sessions go to the least-used replica, later turns stick to theirs."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from verl.experimental.agent_loop.server_manager import AsyncLLMServerManager
from verl.workers.rollout.async_server import TokenOutput


@dataclass
class RecordingReplica:
    """A replica that answers with its own rank and records what it was asked."""

    replica_rank: int
    requests: list[tuple[str, list[int]]] = field(default_factory=list)

    async def generate(self, prompt_ids, sampling_params, request_id):
        self.requests.append((request_id, prompt_ids))
        return TokenOutput(token_ids=[self.replica_rank], log_probs=[0.0], stop_reason="stop")


def test_least_requests_and_sticky_sessions():
    replicas = [RecordingReplica(i) for i in range(3)]
    manager = AsyncLLMServerManager(config=None, server_handles=replicas)

    async def turns():
        first = [await manager.generate(f"traj-{i}", prompt_ids=[i], sampling_params={}) for i in range(6)]
        again = [await manager.generate(f"traj-{i}", prompt_ids=[i, 9], sampling_params={}) for i in range(6)]
        return first, again

    first, again = asyncio.run(turns())
    ranks = [out.token_ids[0] for out in first]
    assert sorted(ranks) == [0, 0, 1, 1, 2, 2]  # 6 sessions spread evenly
    assert [out.token_ids[0] for out in again] == ranks  # each session's second turn on its replica
    assert all(len(r.requests) == 4 for r in replicas)


def test_session_cache_is_bounded():
    replicas = [RecordingReplica(0), RecordingReplica(1)]
    manager = AsyncLLMServerManager(config=None, server_handles=replicas, max_cache_size=2)
    for i in range(5):
        manager.choose_server(f"traj-{i}")
    assert list(manager._sessions) == ["traj-3", "traj-4"]
