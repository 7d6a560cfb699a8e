"""A sanity check of the fluency language model: BLiMP's minimal pairs (issue 57; docs/studies/natural.md).

    ROBENCH_DATA_DIR=/path/to/shared/data HF_HUB_OFFLINE=1 python studies/lm_blimp.py [--prefix-pairs N]

BLiMP (Warstadt et al., TACL 2020) scores a language model by whether it gives the grammatical sentence of each
pair the higher whole-sentence log-probability; the causal LM (`robench.engine.resources.causal_lm`) is scored
exactly so. The pairs are those of docs/studies/analysis.md's BLiMP table (the first 100 of each of the 20
one-prefix sets, the first 10 of each of the 47 others: 2,470 pairs), where the MiniLM MLM head
(`robench.analysis.mlm_head`, pseudo-log-likelihood) scored 52.4% overall on the pre-trained encoder. Prints
Markdown: overall (the mean over sets, BLiMP's convention), per field, and the anaphor-agreement sets.
"""
from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from robench.analysis.blimp import blimp_files, load_set
from robench.analysis.syntax_config import ANAPHOR_SETS, BlimpConfig
from robench.core.paths import resolve_settings
from robench.engine.resources.causal_lm import language_model

MLM_HEAD_OVERALL = 52.4  # docs/studies/analysis.md, "pre-trained MiniLM", the same pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix-pairs", type=int, default=100)
    parser.add_argument("--pll-pairs", type=int, default=10)
    args = parser.parse_args()
    settings = resolve_settings(read_only=True)
    config = BlimpConfig(pll_pairs=args.pll_pairs, prefix_pairs=args.prefix_pairs)
    sets = [load_set(path, config) for path in blimp_files(settings.require_data_dir() / "blimp")]
    lm = language_model(settings)
    accuracy: dict[str, float] = {}
    fields: dict[str, list[float]] = defaultdict(list)
    for blimp_set in sets:
        logp = np.array(lm.log_probs([s for p in blimp_set.pairs for s in (p.good, p.bad)]))
        accuracy[blimp_set.uid] = 100 * float(np.mean(logp[0::2] > logp[1::2]))
        fields[blimp_set.field].append(accuracy[blimp_set.uid])
    pairs = sum(len(s.pairs) for s in sets)
    print(f"| scorer | BLiMP overall ({len(sets)} sets, {pairs} pairs) | "
          + " | ".join(ANAPHOR_SETS) + " |")
    print("|---|---|" + "---|" * len(ANAPHOR_SETS))
    anaphor = " | ".join(f"{accuracy[u]:.1f}" for u in ANAPHOR_SETS)
    print(f"| {lm.source.name} ({lm.source.quantisation}), whole-sentence log p | "
          f"{np.mean(list(accuracy.values())):.1f} | {anaphor} |")
    print(f"| MiniLM MLM head (pre-trained encoder, PLL; docs/studies/analysis.md) | {MLM_HEAD_OVERALL} | "
          "27.0 | 55.0 |")
    print("\n| field | sets | " + f"{lm.source.name} |\n|---|---|---|")
    for name, values in sorted(fields.items()):
        print(f"| {name} | {len(values)} | {np.mean(values):.1f} |")


if __name__ == "__main__":
    main()
