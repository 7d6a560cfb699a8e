"""Which check of the `natural` setting removes which swaps (docs/natural.md, "Which filter removes what").

    ROBENCH_DATA_DIR=/path/to/shared/data HF_HUB_OFFLINE=1 nice python studies/natural_filters.py [--swaps 300]

Input: the successful adversarial examples of the committed reference (`results/reference`, packed; read through
`robench.core.packed.runs_to_read`, as `robench unpack` does) of TextFooler, gradient-swap and BERT-Attack under
`textdefender` on the bert victim, seeds 0 and 1. Per attack, whole examples are drawn at random (seed 0) until
they hold at least `--swaps` swaps. A swap is a word that differs, position by position, between an original and
its adversarial text (an `a`/`an` made to agree is no swap); each swap is judged applied alone to the original.

The checks are the setting's own objects, loaded as TextFooler loads them under `budget=natural`
(`robench.attacks.textfooler.load_resources`, `robench.attacks.common.setting_constraints`,
`robench.engine.natural.natural_constraints`), in the order an attack runs them: `FixedPhrases` (which words may
change), Morris et al.'s word cosine >= 0.9 (the synonym table's), `Inflection`, the sense filter, `GrammarCheck`,
and last the sentence encoder (cosine 0.98 mapped to MiniLM, 15-word windows, short texts checked).

Per attack it prints: the share of swaps each check rejects alone; the share `Inflection` passes in another form
(re-inflected, or with an `a`/`an` made to agree); the share surviving the checks cumulatively, in order, each on
the swap as the one before passed it on; and the share of examples whose every swap passes every check (an upper
bound on the share of these adversarial texts the setting could produce as they are).
"""
from __future__ import annotations

import argparse
import csv
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from robench.core.packed import runs_to_read
from robench.engine.constraints import Constraint, IndexConstraint, Similarity, Swap
from robench.engine.words import Words, is_article_agreement

REFERENCE = Path(__file__).resolve().parents[1] / "results" / "reference"
ATTACKS = ("textfooler", "gradient-swap", "bert-attack")
MODEL, SEEDS, BUDGET = "bert", (0, 1), "textdefender"

Check = Callable[[Words, Swap], Swap | None]  # the swap as the check passes it on; None: rejected


@dataclass(frozen=True)
class Example:
    """A successful adversarial example: its original text and its swaps."""

    attack: str
    key: str  # run id:row index
    original: Words
    swaps: tuple[Swap, ...]


@dataclass(frozen=True)
class Verdict:
    """What the checks do to one swap."""

    rejected_alone: frozenset[str]  # checks that reject the swap applied alone to the original
    changed_alone: frozenset[str]  # checks that pass it in another form (Inflection)
    survives: tuple[bool, ...]  # per check, in order: still alive after the checks up to it, cumulatively


@dataclass
class AttackTable:
    """The per-check shares of one attack."""

    examples: int
    swaps: int
    rejected_alone: dict[str, float]
    changed_alone: dict[str, float]
    surviving: dict[str, float]  # after each check, cumulatively
    examples_all_pass: float
    rejected_samples: dict[str, list[str]] = field(default_factory=dict)  # a few "old -> new" per check


def word_swaps(original: Words, perturbed: Words) -> tuple[Swap, ...] | None:
    """The swaps that turn `original` into `perturbed`; None when the word counts differ (no word substitution)."""
    if len(original.words) != len(perturbed.words):
        return None
    return tuple(Swap(i, new) for i, (old, new) in enumerate(zip(original.words, perturbed.words))
                 if old.lower() != new.lower() and not is_article_agreement(old, new))


def index_check(constraint: IndexConstraint) -> Check:
    return lambda words, swap: swap if constraint.modifiable(words, words, swap.i) else None


def filter_check(constraint: Constraint) -> Check:
    def check(words: Words, swap: Swap) -> Swap | None:
        kept = constraint.filter(words, words, [swap])
        return kept[0] if kept else None
    return check


def similarity_check(similarity: Similarity, embed: Callable[[list[str]], Any]) -> Check:
    """The sentence encoder's check of one swap against the text before it (`embed`: L2-normalised rows)."""
    def check(words: Words, swap: Swap) -> Swap | None:
        pair = similarity.pair(words, words, swap.apply(words), swap.i)
        if pair is None:
            return swap
        a, b = embed(list(pair))
        return swap if float(similarity.score(a, b)) >= similarity.threshold else None
    return check


def judge(words: Words, swap: Swap, checks: Sequence[tuple[str, Check]]) -> Verdict:
    """Each check alone on `swap`, then all of them in order, each on what the one before passed on."""
    alone = {name: check(words, swap) for name, check in checks}
    survives, current = [], swap
    for name, check in checks:
        if current is not None:
            current = alone[name] if current == swap else check(words, current)
        survives.append(current is not None)
    return Verdict(frozenset(n for n, r in alone.items() if r is None),
                   frozenset(n for n, r in alone.items() if r is not None and r != swap), tuple(survives))


def attack_table(examples: Sequence[Example], checks: Sequence[tuple[str, Check]], samples: int = 4
                 ) -> AttackTable:
    """The shares of one attack's swaps each check rejects alone, changes and lets survive cumulatively."""
    names = [name for name, _ in checks]
    verdicts = [(ex, swap, judge(ex.original, swap, checks)) for ex in examples for swap in ex.swaps]
    n = len(verdicts)

    def share(count: int) -> float:
        return count / n if n else float("nan")

    rejected: dict[str, list[str]] = {name: [] for name in names}
    for ex, swap, verdict in verdicts:
        for name in verdict.rejected_alone:
            rejected[name].append(f"{ex.original.words[swap.i]} -> {swap.word}")
    every_pass = [all(v.survives[-1] for e, _, v in verdicts if e is ex) for ex in examples]
    return AttackTable(
        examples=len(examples), swaps=n,
        rejected_alone={name: share(len(rejected[name])) for name in names},
        changed_alone={name: share(sum(name in v.changed_alone for _, _, v in verdicts)) for name in names},
        surviving={name: share(sum(v.survives[k] for _, _, v in verdicts)) for k, name in enumerate(names)},
        examples_all_pass=sum(every_pass) / len(examples) if examples else float("nan"),
        rejected_samples={name: random.Random(0).sample(found, min(samples, len(found)))
                          for name, found in rejected.items()})


# --- the reference's examples and the real checks --------------------------------------------------------------

def reference_examples(reference: Path, attack: str) -> list[Example]:
    """The successful examples of `attack` on `MODEL`, seeds `SEEDS`, under `BUDGET` in the packed reference."""
    runs = runs_to_read(reference)
    out = []
    for path in sorted(runs.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        spec = record["spec"]
        if (spec["model"], spec["attack"]) != (MODEL, attack) or spec["seed"] not in SEEDS \
                or record["hyperparameters"]["attack"].get("budget") != BUDGET:
            continue
        with path.with_suffix(".csv").open(newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                if row["status"] != "successful":
                    continue
                original = Words.of((row["original_text"],))
                swaps = word_swaps(original, Words.of((row["perturbed_text"],)))
                if swaps:
                    out.append(Example(attack, f"{record['run_id']}:{row['index']}", original, swaps))
    return out


def draw(examples: Sequence[Example], min_swaps: int, seed: int = 0) -> list[Example]:
    """Whole examples in a random order until they hold at least `min_swaps` swaps (all when they hold fewer)."""
    shuffled = list(examples)
    random.Random(seed).shuffle(shuffled)
    out, total = [], 0
    for example in shuffled:
        if total >= min_swaps:
            break
        out.append(example)
        total += len(example.swaps)
    return out


def natural_checks(settings: Any) -> list[tuple[str, Check]]:
    """The `natural` setting's checks as TextFooler loads them (CPU), in the order an attack runs them."""
    import torch

    from robench.attacks.common import setting_constraints
    from robench.attacks.textfooler import TextFoolerParams, load_resources
    from robench.engine.natural import natural_constraints

    params = TextFoolerParams(budget="natural")
    res = load_resources(params, settings, torch.device("cpu"))
    _, cosine, similarity = setting_constraints(params, res.encoder, res.synonyms)
    fixed, inflection, sense, grammar = natural_constraints(res.natural)
    return [("fixed phrases", index_check(fixed)), (f"word cosine >= {params.min_cos}", filter_check(cosine)),
            ("inflection", filter_check(inflection)), ("sense", filter_check(sense)),
            ("grammar", filter_check(grammar)),
            (f"sentence encoder ({similarity.threshold:.4f})", similarity_check(similarity, res.encoder.embed))]


def print_tables(tables: dict[str, AttackTable], names: Sequence[str]) -> None:
    def pct(x: float) -> str:
        return f"{100 * x:.0f}%"

    print("\nRejected alone (share of swaps; inflection: dropped, and in brackets passed in another form):\n")
    print("| attack | swaps (examples) | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for attack, t in tables.items():
        cells = [pct(t.rejected_alone[n]) + (f" ({pct(t.changed_alone[n])})" if t.changed_alone[n] else "")
                 for n in names]
        print(f"| {attack} | {t.swaps} ({t.examples}) | " + " | ".join(cells) + " |")
    print("\nSurviving cumulatively, in this order (share of swaps), and examples whose every swap passes:\n")
    print("| attack | " + " | ".join(f"+ {n}" for n in names) + " | examples all pass |")
    print("|---|" + "---|" * (len(names) + 1))
    for attack, t in tables.items():
        print(f"| {attack} | " + " | ".join(pct(t.surviving[n]) for n in names)
              + f" | {pct(t.examples_all_pass)} |")
    print("\nSamples of swaps each check rejects alone:")
    for attack, t in tables.items():
        for name, found in t.rejected_samples.items():
            print(f"  {attack} / {name}: {'; '.join(found)}")


def main() -> None:
    import torch

    from robench.core.paths import resolve_settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--swaps", type=int, default=300, help="swaps to draw per attack (whole examples)")
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    args = parser.parse_args()
    torch.set_num_threads(1)
    checks = natural_checks(resolve_settings())
    tables = {}
    for attack in ATTACKS:
        found = reference_examples(args.reference, attack)
        drawn = draw(found, args.swaps)
        print(f"{attack}: {len(found)} successful examples with swaps, {len(drawn)} drawn", flush=True)
        tables[attack] = attack_table(drawn, checks)
    print_tables(tables, [name for name, _ in checks])


if __name__ == "__main__":
    main()
