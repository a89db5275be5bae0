"""Run every ``benchmarks/bench_*.py`` module's ``main()`` in turn (``make bench``).

Usage: ``python -m benchmarks.run_all [name-substring ...]`` runs only the modules whose name contains one of
the substrings. A failing benchmark is reported and the others still run; the exit status is 1 if any failed.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback
from pathlib import Path


def benchmark_modules() -> list[str]:
    """Names of the ``bench_*`` modules next to this file, sorted."""
    folder = Path(__file__).resolve().parent
    return sorted(info.name for info in pkgutil.iter_modules([str(folder)]) if info.name.startswith("bench_"))


def main(argv: list[str] | None = None) -> int:
    selected = list(sys.argv[1:] if argv is None else argv)
    names = [name for name in benchmark_modules() if not selected or any(part in name for part in selected)]
    failed = []
    for name in names:
        print(f"===== benchmarks.{name} =====", flush=True)
        start = time.perf_counter()
        try:
            importlib.import_module(f"benchmarks.{name}").main()
        except Exception:  # one broken benchmark must not hide the others' numbers
            traceback.print_exc()
            failed.append(name)
        print(f"----- {name}: {time.perf_counter() - start:.1f} s", flush=True)
    if failed:
        print(f"failed benchmarks: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
