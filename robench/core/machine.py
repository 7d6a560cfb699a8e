"""How busy and how fast this machine is now: its load (`os.getloadavg`) and a short timed probe of one core.

A cost measured on an idle reference machine (a first-use build's seconds) is scaled to this machine as it is now
by `slowdown()`: the seconds of a fixed pure-Python workload here and now over its seconds on the reference
machine idle (`PROBE_REFERENCE_SECONDS`). The probe runs on one core, as the builds do, and shares that core with
whatever else runs, so it sees both a slower CPU and a loaded one. A speed measurement records the `load()` it was
taken under, and `load_differs` says when the machine's load has changed enough that it is taken again.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

PROBE_ROUNDS = 24  # the probe: this many rounds of `_probe_round`
# the probe's seconds on the reference machine idle: its CPU seconds there (the least of 30 tries; 2-core x86 VM,
# Python 3.11, December 2026), which a process that waits for no other one also takes in wall seconds
PROBE_REFERENCE_SECONDS = 0.055
LOAD_RATIO = 1.5  # a CPU share this many times larger or smaller than at a measurement's time: measure again


@dataclass(frozen=True)
class Load:
    """The machine's load when something was measured: 1-minute load average and its CPUs."""

    average: float  # os.getloadavg()[0]; 0.0 where the system does not say
    cpus: int

    @property
    def share(self) -> float:
        """The share of its CPUs a new process can expect: 1 on an idle machine, less when more runs than fits."""
        return min(1.0, self.cpus / max(self.average + 1.0, 1.0))

    def describe(self) -> str:
        return f"load {self.average:.1f} on {self.cpus} CPUs"

    def to_dict(self) -> dict[str, float | int]:
        return {"average": self.average, "cpus": self.cpus}


def load() -> Load:
    """The machine's load now."""
    try:
        average = os.getloadavg()[0]
    except (OSError, AttributeError):  # not every system says (Windows)
        average = 0.0
    return Load(round(average, 2), os.cpu_count() or 1)


def load_differs(then: Load, now: Load) -> bool:
    """Whether the CPU share a process gets now is more than LOAD_RATIO times above or below the share then."""
    ratio = now.share / then.share
    return ratio > LOAD_RATIO or ratio < 1 / LOAD_RATIO


def slowdown() -> float:
    """How many times longer one core's work takes here now than on the reference machine idle (at least 0.25)."""
    start = time.perf_counter()
    for _ in range(PROBE_ROUNDS):
        _probe_round()
    return max((time.perf_counter() - start) / PROBE_REFERENCE_SECONDS, 0.25)


def _probe_round() -> int:
    """A fixed mix of the work the builds do: dictionary and string operations in pure Python."""
    table: dict[str, int] = {}
    for i in range(12_000):
        key = f"w{i % 997}"
        table[key] = table.get(key, 0) + len(key)
    return sum(table.values())
