"""The candidate sources compared (docs/studies/resources.md): SimLex-999 rho, candidates per word, coverage on SST-2 /
MR / AG, held-out recall. Writes results/evidence-cpu/attack-validity/sources.json.

    ROBENCH_DATA_DIR=/path/to/shared/data python studies/attack_validity_sources.py

* candidates per word: over the non-stopword alphabetic tokens of SST-2 dev (token-weighted), K = 50;
* coverage: share of those tokens (SST-2 dev, MR all, AG test) with at least one candidate;
* SimLex-999 rho: Spearman between SimLex and the source's similarity: a listed candidate (either direction)
  ranks above any other pair, ties broken by the source's cosine (the order an attack sees); for the vector
  spaces also the cosine alone;
* held-out recall: SimLex-999 pairs rated >= 7 that are not listed antonyms (229 pairs, none used in any build),
  proposed in either direction; and the share of SimLex pairs rated <= 3 proposed (false synonyms);
* leave-one-out: WordNet pairs (top-3 senses) between SST-2 dev words, held out of a build from the Alzantot lists
  and PPDB only, recovered by each source.
"""
import csv
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from robench.core.paths import resolve_settings
from robench.engine.resources import stopwords, synonym_table
from robench.engine.resources.lexicon import lexicon
from robench.engine.resources.lexicon_table import candidate_pairs
from robench.engine.words import split_words

S = resolve_settings()
D = S.data_dir
L, stop = lexicon(S), stopwords(S)


def corpora() -> dict[str, list[str]]:
    rows = list(csv.reader((D / "sst2/dev.tsv").open(encoding="utf-8"), delimiter="\t", quoting=csv.QUOTE_NONE))
    mr = [line for f in ("rt-polarity.pos", "rt-polarity.neg")
          for line in (D / "mr" / f).open(encoding="utf-8", errors="replace")]
    ag = [r[1] + " " + r[2] for r in csv.reader((D / "ag_news/test.csv").open(encoding="utf-8"))]
    return {"sst2": [r[0] for r in rows[1:]], "mr": mr, "ag": ag}


def tokens(texts: list[str]) -> list[str]:
    return [w.lower() for t in texts for w in split_words(t) if w.lower() not in stop and w.isalpha()]


def table_source(table, min_cos: float):
    cache: dict[str, list[str]] = {}

    def cands(w: str) -> list[str]:
        if w not in cache:
            cache[w] = [c for c, _ in table.neighbours(w, 50, min_cos)]
        return cache[w]
    return cands, table


def main() -> None:
    glove, lex_table, alz = (synonym_table(S, s) for s in ("counterfitted-glove", "lexicon", "neighbors"))
    toks = {k: tokens(v) for k, v in corpora().items()}
    simlex = list(csv.DictReader((D / "counterfitted/simlex999.txt").open(encoding="utf-8"), delimiter="\t"))
    high = [(r["word1"], r["word2"]) for r in simlex if float(r["SimLex999"]) >= 7 and not L.is_antonym(r["word1"],
                                                                                                        r["word2"])]
    low = [(r["word1"], r["word2"]) for r in simlex if float(r["SimLex999"]) <= 3]
    vocab = sorted(set(toks["sst2"]))
    no_wn, _ = candidate_pairs(L, vocab, max_sense=3)  # pairs among SST-2 words; split by resource below
    held_out = {(a, b) for a, b in no_wn if b not in L.synonyms_of(a, ("alzantot", "ppdb"))}
    sources = {
        "counterfitted-glove (K 50, cos >= 0.5: the old default)": table_source(glove, 0.5),
        "neighbors (Alzantot lists)": table_source(alz, -1.0),
        "lexicon, textdefender (K 50, no cosine bound: the new default)": table_source(lex_table, -1.0),
        "lexicon, paper min_cos 0.5": table_source(lex_table, 0.5),
        "lexicon, morris2020 (cos >= 0.9)": table_source(lex_table, 0.9),
    }
    out = {"simlex_high_pairs": len(high), "simlex_low_pairs": len(low), "held_out_wordnet_pairs": len(held_out),
           "tokens": {k: len(v) for k, v in toks.items()}, "sources": {}}
    for name, (cands, table) in sources.items():
        n = np.array([len(cands(w)) for w in toks["sst2"]])
        listed = [b in cands(a) or a in cands(b) for a, b in ((r["word1"], r["word2"]) for r in simlex)]
        cos = [table.cos(r["word1"], r["word2"]) for r in simlex]
        score = [(2.0 if hit else 0.0) + (c if c is not None else -1.0) for hit, c in zip(listed, cos)]
        gold = [float(r["SimLex999"]) for r in simlex]
        row = {"candidates_mean": float(n.mean()), "candidates_median": float(np.median(n)),
               "candidates_p10_p90": [float(np.percentile(n, 10)), float(np.percentile(n, 90))],
               "candidates_zero": float(np.mean(n == 0)),
               "coverage": {k: float(np.mean([len(cands(w)) > 0 for w in v])) for k, v in toks.items()},
               "simlex_rho_listed_then_cos": float(spearmanr(score, gold)[0]),
               "simlex_high_recall": float(np.mean([b in cands(a) or a in cands(b) for a, b in high])),
               "simlex_low_proposed": float(np.mean([b in cands(a) or a in cands(b) for a, b in low])),
               "held_out_wordnet_recall": float(np.mean([b in cands(a) for a, b in held_out]))}
        if table.vectors is not None:
            ok = [i for i, c in enumerate(cos) if c is not None]
            row["simlex_rho_cosine"] = float(spearmanr([cos[i] for i in ok], [gold[i] for i in ok])[0])
            row["simlex_pairs_in_vocabulary"] = len(ok)
        out["sources"][name] = row
        print(name, json.dumps(row), flush=True)
    out_path = Path(__file__).resolve().parents[1] / "results" / "evidence-cpu" / "attack-validity" / "sources.json"
    out_path.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
