"""benchmarks.gpu.nccl_transport off the GPU: it skips without two GPUs, gives each rank the case's view of the
GPUs, and reads the transport from NCCL's channel lines in the forms NCCL has logged them (recent:
``via P2P/CUMEM/read``; older: ``via direct shared memory``, quoted in ray-project/ray#16979)."""

from __future__ import annotations

from benchmarks.gpu import nccl_transport


def test_the_transport_is_read_from_channel_lines():
    lines = {
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read": "P2P/CUMEM/read",
        "h:1:2 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via SHM/direct/direct  ": "SHM/direct/direct",
        "(pid=37103) h:37103:37390 [3] NCCL INFO Channel 01 : 3[b0] -> 0[80] via direct shared memory": (
            "direct shared memory"
        ),
    }
    for line, transport in lines.items():
        assert nccl_transport.TRANSPORT.findall(line) == [transport]


def test_without_two_gpus_it_skips(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["nccl_transport"])
    assert nccl_transport.main() == 0
    assert "needs two GPUs, skipped" in capsys.readouterr().out


def test_a_rank_sees_its_own_gpu_or_both_and_the_cumem_setting_it_is_given(monkeypatch):
    from benchmarks.gpu.gpu_pair import rank_env

    monkeypatch.setenv("NCCL_CUMEM_ENABLE", "1")  # the machine's own setting never leaks into a case
    own = rank_env(1, 29700, own_gpu_only=True, cumem=None)
    assert (own["CUDA_VISIBLE_DEVICES"], own["LOCAL_RANK"], own["RANK"]) == ("1", "0", "1")
    assert "NCCL_CUMEM_ENABLE" not in own
    shared = rank_env(1, 29700, own_gpu_only=False, cumem="0", NCCL_DEBUG="INFO")
    assert (shared["CUDA_VISIBLE_DEVICES"], shared["LOCAL_RANK"]) == ("0,1", "1")
    assert (shared["NCCL_CUMEM_ENABLE"], shared["NCCL_DEBUG"], shared["MASTER_PORT"]) == ("0", "INFO", "29700")
