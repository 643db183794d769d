"""Benchmarks run by hand (never by the unit test run): ``python -m benchmarks.<name>``.

Each script writes a dated Markdown report to ``benchmarks/results/``; see
``benchmarks/README.md`` for what each one measures and how long it takes.
"""
