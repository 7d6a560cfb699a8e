"""`robench bench NAME`: benchmarks that print ratios measured side by side in one run.

Each benchmark is a module with `main(argv: list[str]) -> None`. Speed and memory
targets live here, never in timed unit tests.
"""
from __future__ import annotations

BENCHMARKS: dict[str, str] = {
    "defenses": "robench.benchmarks.defenses",
    "train": "robench.benchmarks.train",
    "analysis": "robench.benchmarks.analysis",
    "attack": "robench.benchmarks.attack",
}
