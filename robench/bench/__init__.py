"""Benchmarks that print ratios measured side by side in one run (`robench bench NAME`).

One module per benchmark, each a library function taking a dataclass of options:
`defenses.compare_defenses` (also `search_imbert`, `step_cost`), `train.compare_trainers`,
`analysis.analysis_bench`, `attack.compare_attacks`. Their command-line flags live in
`robench/cli/bench.py`. Speed and memory targets live here, never in timed unit tests.
"""
