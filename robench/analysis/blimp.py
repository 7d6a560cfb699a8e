"""BLiMP minimal pairs scored through a masked-language-model head (Warstadt et al., "BLiMP: The
Benchmark of Linguistic Minimal Pairs for English", TACL 2020).

A pair is correct when the model prefers the grammatical sentence. Two scorings:

- **one-prefix sets** (`one_prefix_method: true`, e.g. both anaphor-agreement sets): the pair
  differs in one critical word after a shared prefix (`one_prefix_prefix`). The critical word is
  masked in its sentence and the pair is correct when log P(good word) > log P(bad word) at the
  mask. When either word is several sub-words, each candidate's sub-words are all masked in its
  own sentence and their log-probabilities summed (the two inputs then differ in the number of
  masks). BLiMP scores these sets with a left-to-right LM on the prefix alone; an MLM also sees
  the words after the critical one (usually just the final period).
- **all other sets**: pseudo-log-likelihood (Salazar et al., "Masked Language Model Scoring",
  ACL 2020): each token is masked in turn and the log-probabilities of the true tokens summed;
  the sentence with the higher PLL is preferred. All masked copies are batched.

Pairs are the first N lines of each set (BLiMP's pairs are generated in random order).
Accuracies are reported per set, per field (mean over its sets; BLiMP's one
`syntax/semantics` set is counted under `syntax_semantics`) and overall (mean over sets, which is
BLiMP's overall accuracy when every set has the same number of pairs).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from robench.analysis.syntax_config import ANAPHOR_SETS, FIELDS, BlimpConfig
from robench.core.errors import RobenchError

N_SETS = 67
# (input_ids [B, T], attention_mask [B, T], chosen [B, T] bool) -> log-probs [M, V] at the chosen
# positions, in row-major order (M = chosen.sum())
LogProbs = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Pair:
    good: str
    bad: str
    prefix: str | None = None  # one-prefix sets: shared prefix and the two critical words
    word_good: str | None = None
    word_bad: str | None = None


@dataclass
class BlimpSet:
    uid: str
    field: str
    one_prefix: bool
    pairs: list[Pair]


@dataclass
class BlimpResult:
    per_set: dict[str, float]
    per_field: dict[str, float]
    overall: float
    pairs: dict[str, int] = field(default_factory=dict)  # pairs scored per set

    def metrics(self, prefix: str = "blimp_") -> dict[str, float]:
        """Flat record metrics: overall, each field, and both anaphor-agreement sets (always)."""
        out = {f"{prefix}overall": self.overall}
        out.update({f"{prefix}{name}": value for name, value in self.per_field.items()})
        out.update({f"{prefix}{uid}": self.per_set.get(uid, float("nan")) for uid in ANAPHOR_SETS})
        return out


# --------------------------------------------------------------------------- data

def blimp_files(root: Path) -> list[Path]:
    """The 67 set files of `<data_dir>/blimp`, or an error before any expensive work."""
    files = sorted(root.glob("*.jsonl")) if root.is_dir() else []
    if len(files) != N_SETS or not all((root / f"{uid}.jsonl").is_file() for uid in ANAPHOR_SETS):
        raise RobenchError(f"BLiMP data not found or incomplete in {root}: expected its {N_SETS} `<set>.jsonl` "
                           f"files (found {len(files)}); point --data-dir at a directory laid out like shared/data")
    return files


def load_set(path: Path, config: BlimpConfig) -> BlimpSet:
    """The first `prefix_pairs` (one-prefix sets) or `pll_pairs` (others) pairs of one set file."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows:
        raise RobenchError(f"BLiMP set {path} is empty")
    one_prefix = bool(rows[0].get("one_prefix_method"))
    rows = rows[:config.prefix_pairs if one_prefix else config.pll_pairs]
    pairs = [Pair(r["sentence_good"], r["sentence_bad"], r.get("one_prefix_prefix"), r.get("one_prefix_word_good"),
                  r.get("one_prefix_word_bad")) if one_prefix else Pair(r["sentence_good"], r["sentence_bad"])
             for r in rows]
    return BlimpSet(rows[0]["UID"], rows[0]["field"].replace("/", "_"), one_prefix, pairs)


def fingerprint(files: Sequence[Path]) -> str:
    """sha256 (16 hex digits) over the set files' names and contents."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# --------------------------------------------------------------------------- scoring

@dataclass(frozen=True)
class Row:
    """One masked input: token ids, the masked positions and, per candidate, the target ids there."""

    ids: tuple[int, ...]
    positions: tuple[int, ...]
    targets: tuple[tuple[int, ...], ...]


def score_rows(log_probs: LogProbs, rows: Sequence[Row], pad_id: int, batch_size: int,
               advance: Callable[[int], None] = lambda n: None) -> list[list[float]]:
    """For each row and each of its candidates, the sum of the target log-probabilities at the
    masked positions. Rows are batched in length order (little padding)."""
    out: list[list[float]] = [[] for _ in rows]
    order = sorted(range(len(rows)), key=lambda i: len(rows[i].ids))
    for start in range(0, len(order), batch_size):
        chunk = [rows[i] for i in order[start:start + batch_size]]
        width = max(len(r.ids) for r in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        attention = torch.zeros(len(chunk), width, dtype=torch.long)
        chosen = torch.zeros(len(chunk), width, dtype=torch.bool)
        for i, row in enumerate(chunk):
            ids[i, :len(row.ids)] = torch.tensor(row.ids)
            attention[i, :len(row.ids)] = 1
            chosen[i, list(row.positions)] = True
        with torch.inference_mode():
            logp = log_probs(ids, attention, chosen).float().cpu()
        offset = 0
        for i, row in zip(order[start:start + batch_size], chunk):
            k = len(row.positions)  # chosen positions come row-major, in increasing position order
            block = logp[offset:offset + k]
            out[i] = [float(block[torch.arange(k), torch.tensor(t)].sum()) for t in row.targets]
            offset += k
        advance(len(chunk))
    return out


def pll_rows(tokenizer, sentence: str) -> list[Row]:
    """One row per real token of `sentence`, that token masked (Salazar et al. 2020)."""
    ids = tokenizer(sentence)["input_ids"]
    special = set(tokenizer.all_special_ids)
    rows = []
    for position, token in enumerate(ids):
        if token in special:
            continue
        masked = list(ids)
        masked[position] = tokenizer.mask_token_id
        rows.append(Row(tuple(masked), (position,), ((token,),)))
    return rows


def prefix_rows(tokenizer, pair: Pair) -> list[Row]:
    """Rows for a one-prefix pair: one row with two candidates when both words are one sub-word,
    else one row per candidate with its sub-words all masked. The first candidate is the good word."""
    pieces = []
    for sentence, word in ((pair.good, pair.word_good), (pair.bad, pair.word_bad)):
        head = f"{pair.prefix} {word}"
        if pair.prefix is None or word is None or not sentence.startswith(head) or \
                sentence[len(head):len(head) + 1].isalnum():
            raise RobenchError(f"BLiMP one-prefix pair is inconsistent: {sentence!r} is not "
                               f"{pair.prefix!r} + {word!r} + a suffix")
        pieces.append((tokenizer(pair.prefix, add_special_tokens=False)["input_ids"],
                       tokenizer(word, add_special_tokens=False)["input_ids"],
                       tokenizer(sentence[len(head):], add_special_tokens=False)["input_ids"]))
    (prefix, good, suffix), (_, bad, _) = pieces
    cls, sep, mask = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id
    if len(good) == 1 and len(bad) == 1:
        ids = (cls, *prefix, mask, *suffix, sep)
        return [Row(ids, (len(prefix) + 1,), ((good[0],), (bad[0],)))]
    return [Row((cls, *prefix, *[mask] * len(word), *suffix, sep),
                tuple(range(len(prefix) + 1, len(prefix) + 1 + len(word))), (tuple(word),))
            for word in (good, bad)]


def score_set(log_probs: LogProbs, tokenizer, blimp_set: BlimpSet, batch_size: int,
              advance: Callable[[int], None] = lambda n: None) -> np.ndarray:
    """Per pair: 1.0 when the good sentence scores strictly higher, else 0.0."""
    rows: list[Row] = []
    spans: list[tuple[int, int, int]] = []  # per pair: start of its rows, rows of the good side, total rows
    for pair in blimp_set.pairs:
        if blimp_set.one_prefix:
            new = prefix_rows(tokenizer, pair)
            good_rows = 1
        else:
            good, bad = pll_rows(tokenizer, pair.good), pll_rows(tokenizer, pair.bad)
            new, good_rows = good + bad, len(good)
        spans.append((len(rows), good_rows, len(new)))
        rows += new
    scores = score_rows(log_probs, rows, tokenizer.pad_token_id, batch_size, advance)
    correct = []
    for start, good_rows, total in spans:
        block = scores[start:start + total]
        if blimp_set.one_prefix and total == 1:
            good, bad = block[0]
        else:
            good = sum(s[0] for s in block[:good_rows])
            bad = sum(s[0] for s in block[good_rows:])
        correct.append(1.0 if good > bad else 0.0)
    return np.asarray(correct)


def rows_per_set(tokenizer, blimp_set: BlimpSet) -> int:
    """Masked rows a set will need (for the progress bar)."""
    if blimp_set.one_prefix:
        return sum(len(prefix_rows(tokenizer, p)) for p in blimp_set.pairs)
    return sum(len(pll_rows(tokenizer, p.good)) + len(pll_rows(tokenizer, p.bad)) for p in blimp_set.pairs)


def evaluate(log_probs: LogProbs, tokenizer, sets: Sequence[BlimpSet], batch_size: int,
             advance: Callable[[int], None] = lambda n: None) -> BlimpResult:
    """Accuracy per set, per field and overall."""
    per_set: dict[str, float] = {}
    fields: dict[str, list[float]] = {}
    for blimp_set in sets:
        acc = float(score_set(log_probs, tokenizer, blimp_set, batch_size, advance).mean())
        per_set[blimp_set.uid] = acc
        fields.setdefault(blimp_set.field, []).append(acc)
    per_field = {name: float(np.mean(fields[name])) for name in FIELDS if name in fields}
    return BlimpResult(per_set, per_field, float(np.mean(list(per_set.values()))),
                       {s.uid: len(s.pairs) for s in sets})


def head_log_probs(last_hidden: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                   head: Callable[[torch.Tensor], torch.Tensor], device: torch.device) -> LogProbs:
    """LogProbs from an encoder's last-layer states and an MLM head (vocabulary projection only at
    the masked positions)."""
    def log_probs(ids: torch.Tensor, attention_mask: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
        hidden = last_hidden(ids.to(device), attention_mask.to(device))
        return torch.log_softmax(head(hidden[chosen.to(device)]).float(), dim=-1)
    return log_probs
