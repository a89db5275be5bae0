"""Speed and memory benchmarks; each ``bench_*.py`` module has a ``main()`` printing ratios vs a baseline."""
