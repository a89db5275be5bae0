"""Between the runs of one GPU benchmark call, what a run leaves behind is killed (``benchmarks.gpu.leftovers``),
checked here with real process trees: a grandchild that outlives a killed parent, and a sweep by command line that
spares the sweeping process and its ancestors."""

import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil

from benchmarks.bench_gpu_grpo import _run_command
from benchmarks.gpu import leftovers


def _alive(pid: int) -> bool:
    """Running or sleeping: not gone and not a zombie (an orphan's zombie waits for a reaper this test does not own)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _wait(condition, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


SLEEPER = "import time; time.sleep(120)"


def test_a_timed_out_run_loses_its_whole_tree_not_only_its_own_process(tmp_path):
    """A run that starts a grandchild in a session of its own (as Ray starts its head) and then hangs: cut at its
    timeout by ``kill_tree``, both are gone. ``Popen.kill``, the old default, leaves the grandchild running."""
    pid_file = tmp_path / "grandchild.pid"
    script = textwrap.dedent(f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", {SLEEPER!r}], start_new_session=True)
        open({str(pid_file)!r}, "w").write(str(child.pid))
        print("started", flush=True)
        time.sleep(120)
    """)
    rc = _run_command("hang", [sys.executable, "-c", script], dict(os.environ), tmp_path / "hang.log", 3.0,
                      kill=leftovers.kill_tree)  # fmt: skip
    assert rc == 124
    grandchild = int(pid_file.read_text())
    assert _wait(lambda: not _alive(grandchild)), "the grandchild outlived the killed run"
    assert "killed after 3 s" in (tmp_path / "hang.log").read_text()


def test_descendants_lists_children_and_grandchildren():
    script = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {SLEEPER!r}]); time.sleep(120)"
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        assert _wait(lambda: len(leftovers.descendants(parent.pid)) == 1)
        (child,) = leftovers.descendants(parent.pid)
        assert psutil.Process(child).ppid() == parent.pid
        assert leftovers.descendants(os.getpid())[0] == parent.pid
    finally:
        leftovers.kill_tree(parent)
        parent.wait()


def test_a_sweep_kills_what_matches_and_spares_itself_and_its_ancestors(tmp_path):
    """The sweeping process's own command line holds the pattern (as the benchmark's ``--runs standalone-vllm``
    holds ``vllm``); so does an orphan in a session of its own. The sweep kills the orphan, reports it, and lives."""
    marker = f"leftover-{uuid.uuid4().hex}"
    orphan = subprocess.Popen([sys.executable, "-c", SLEEPER, marker], start_new_session=True)
    script = textwrap.dedent(f"""
        import sys
        from benchmarks.gpu import leftovers
        for line in leftovers.sweep(({marker!r},)):
            print(line)
    """)
    try:
        done = subprocess.run([sys.executable, "-c", script, marker], capture_output=True, text=True, timeout=60,
                              cwd=Path(__file__).parents[2])  # fmt: skip
        assert done.returncode == 0, done.stderr
        killed = done.stdout.splitlines()
        assert len(killed) == 1 and killed[0].startswith(f"{orphan.pid} ")
        assert marker in killed[0]
        orphan.wait(timeout=20)
        assert orphan.returncode == -9
    finally:
        orphan.kill()


def test_the_shell_sweep_spares_the_shell_whose_command_names_the_pattern():
    """As a device call runs it: ``bash -c '... --runs sglang,trl,vllm; ...; sweep'``. The ``pkill -f`` it replaces
    matched the call's own shell and killed it before the job's archive was written (session 15)."""
    marker = f"leftover-{uuid.uuid4().hex}"
    orphan = subprocess.Popen([sys.executable, "-c", SLEEPER, marker], start_new_session=True)
    shell = f"{sys.executable} -m benchmarks.gpu.leftovers --pattern {marker}; echo after-{marker}"
    try:
        done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=60,
                              cwd=Path(__file__).parents[2])  # fmt: skip
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].startswith(f"killed leftover {orphan.pid} ")
        assert lines[-1] == f"after-{marker}"  # the shell lived on to the next command
        orphan.wait(timeout=20)
        assert orphan.returncode == -9
    finally:
        orphan.kill()


def test_gpu_memory_is_an_empty_list_without_a_gpu():
    if subprocess.run(["sh", "-c", "command -v nvidia-smi"], capture_output=True).returncode != 0:
        assert leftovers.gpu_memory_used_mib() == []
