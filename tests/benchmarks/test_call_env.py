"""``benchmarks/gpu/call_env.sh``'s time budget: a call's jobs leave its last 15 s for the cleanup and the copy back."""

import subprocess
from pathlib import Path

CALL_ENV = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "call_env.sh"


def _left(tmp_path, call: str | None, started_ago: int = 0) -> tuple[int, str]:
    """What ``left`` prints in a shell that sources call_env.sh, with START set ``started_ago`` seconds back in its
    parent shell (as a device call's command sets it before the install)."""
    setting = f"CALL={call}; " if call is not None else ""
    child = f"{setting}OUT={tmp_path}; source {CALL_ENV}; left"
    script = f"START=$(( $(date +%s) - {started_ago} )) bash -c '{child}'"
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    lines = result.stdout.strip().splitlines()
    return int(lines[-1]), "\n".join(lines[:-1])


def test_a_call_budget_past_585_seconds_is_cut_to_585(tmp_path):
    assert _left(tmp_path, "592") == (585, "== CALL=592 leaves no room to bring the files back: using 585")
    assert _left(tmp_path, "440") == (440, "")
    assert _left(tmp_path, None) == (585, "")


def test_the_budget_counts_from_a_start_set_in_another_shell(tmp_path):
    """START is wall-clock seconds since the epoch, so time spent before the sourcing shell began (an install in the
    call's parent shell) counts: bash's SECONDS restarts in every shell (session 36's call A ran past 600 s)."""
    assert _left(tmp_path, "300", started_ago=100)[0] in (199, 200)  # 300 - 100, a second may tick between
