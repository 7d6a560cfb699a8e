"""What the fluency language model costs on this machine (issue 61: the estimate's LM terms; issue 57, item 7).

    ROBENCH_DATA_DIR=/path/to/shared/data python studies/lm_cost.py [--convert] [--texts 400]

* the scoring rate in words per second, on SST-2 dev sentences each beside a copy with one word swapped (an
  original and its adversarial text, as a run scores its successes: `robench.engine.fluency.run_fluency`),
  timed three times after a warm-up; `robench.engine.fluency.LM_WORDS_PER_SECOND` is its value on the reference
  machine idle;
* with `--convert`, the one-time GGUF conversion (`robench.engine.resources.causal_lm.CONVERT_SECONDS`) timed
  into a scratch cache.

Each line names the machine's load average and `robench.core.machine.slowdown()` (a probe of one core against
the reference machine idle), so a number taken under load reads as its idle equivalent divided by it.
"""
from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

from robench.core.machine import slowdown
from robench.core.paths import resolve_settings
from robench.engine.resources.causal_lm import _cached_conversion, converted_dir, language_model, lm_source


def pairs(settings, n: int) -> list[str]:
    """`n` texts: SST-2 dev sentences, each followed by itself with one word (not the first) swapped for 'good'."""
    from robench.data import TASKS
    from robench.data.loading import load_split, texts_of

    task = TASKS.get("sst2")
    rows = texts_of(load_split(task, "eval", settings.data_dir, "local"), task)
    rng = random.Random(0)
    out = []
    for text in rng.sample([r[-1] for r in rows], n // 2):
        words = text.split()
        i = rng.randrange(1, len(words)) if len(words) > 1 else 0
        out += [text, " ".join(words[:i] + ["good"] + words[i + 1:])]
    return out


def where() -> str:
    return f"load {os.getloadavg()[0]:.1f}, slowdown {slowdown():.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--convert", action="store_true", help="time the GGUF conversion into a scratch cache")
    parser.add_argument("--texts", type=int, default=400)
    args = parser.parse_args()
    settings = resolve_settings(read_only=True)
    if args.convert:
        source = lm_source(settings)
        with tempfile.TemporaryDirectory() as scratch:
            start = time.perf_counter()
            _cached_conversion(source, converted_dir(Path(scratch), source))
            print(f"GGUF conversion: {time.perf_counter() - start:.1f} s ({where()})", flush=True)
    lm = language_model(settings)
    texts = pairs(settings, args.texts)
    words = sum(len(t.split()) for t in texts)
    lm.log_probs(texts[:40])  # warm-up
    for _ in range(3):
        start = time.perf_counter()
        lm.log_probs(texts)
        seconds = time.perf_counter() - start
        print(f"scoring: {len(texts)} texts, {words} words in {seconds:.1f} s: {words / seconds:.0f} words/s, "
              f"{len(texts) / seconds:.1f} texts/s ({where()})", flush=True)


if __name__ == "__main__":
    main()
