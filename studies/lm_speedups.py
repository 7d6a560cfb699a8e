"""Three ways to make the fluency language model cheaper, measured on the read pairs (issue 57, item 7;
docs/studies/natural.md, "Cost"): what each saves, and what it does to the score the constraint reads.

    ROBENCH_DATA_DIR=/path/to/shared/data python studies/lm_speedups.py

* **the vocabulary projection over the scored tokens only, and short passes on one CPU thread** (both adopted:
  `causal_lm._token_log_probs`, `causal_lm.CPU_BATCH_TOKENS`): timed, alternately, against the model's full logits
  (`causal_lm.PLAIN_HEADS` emptied) in passes of 4,096 tokens, on one and on two threads, scoring 144 texts in one
  call, with the largest change of a score and the logits' size per pass;
* **bfloat16 weights**: the model cast to bfloat16, timed against float32 on the same texts, alternately; the
  AUC of each against the readers' "fluent", how far the scores move, and how many pairs change side of 0 nats
  (the read setting's bar);
* **a window after the swap**: each text cut at w tokens after its last changed token (the rest of the text not
  read), for w = 8 and 4 against the whole text: tokens, seconds and AUC.

Run it on an idle machine for times; the AUC and the score changes do not depend on the load.
"""
from __future__ import annotations

import copy
import time

import numpy as np
from lm_fluency import auc_interval, read_pairs, roc_auc

from robench.core.paths import resolve_settings
from robench.engine.resources import causal_lm
from robench.engine.resources.causal_lm import LanguageModel, language_model, sequence_log_probs


def auc_text(scores: np.ndarray, fluent: np.ndarray) -> str:
    low, high = auc_interval(scores, fluent)
    return f"AUC {roc_auc(scores, fluent):.3f} [{low:.3f}, {high:.3f}]"


def common_suffix(a: list[int], b: list[int]) -> int:
    """Tokens the two sequences end with in common (at least their first token stays outside)."""
    n = 0
    while n < min(len(a), len(b)) - 1 and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def scorer_passes(lm: LanguageModel, texts: list[tuple[str, str]]) -> None:
    """The vocabulary projection (full logits or the scored tokens' slices) and the tokens per pass, on one and on
    two CPU threads, for a call of 144 texts (the search's calls of a few texts are one short pass either way)."""
    import torch

    flat = [t for pair in texts for t in pair][:144]
    saved = causal_lm.PLAIN_HEADS, causal_lm.BATCH_TOKENS, causal_lm.CPU_BATCH_TOKENS, torch.get_num_threads()
    trials = {"full logits, 4096-token passes": ((), 4096), "sliced, 4096-token passes": (saved[0], 4096),
              "sliced, 512-token passes": (saved[0], 512)}
    scores = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for name, (heads, tokens) in [*trials.items()] * 2:
            causal_lm.PLAIN_HEADS, causal_lm.BATCH_TOKENS, causal_lm.CPU_BATCH_TOKENS = heads, tokens, tokens
            start = time.perf_counter()
            scores[name] = lm.log_probs(flat)
            print(f"{threads} thread(s), {name}: {len(flat) / (time.perf_counter() - start):.2f} texts/s")
    causal_lm.PLAIN_HEADS, causal_lm.BATCH_TOKENS, causal_lm.CPU_BATCH_TOKENS = saved[:3]
    torch.set_num_threads(saved[3])
    change = max(abs(a - b) for name in trials for a, b in zip(scores[name], scores["full logits, 4096-token passes"]))
    vocab = lm.model.get_output_embeddings().out_features
    print(f"largest score change: {change:.1e}; logits of a 4096-token pass: {4096 * vocab * 4 / 1e6:.0f} MB full, "
          f"{causal_lm.HEAD_ROWS * vocab * 4 / 1e6:.0f} MB a slice (float32, before the softmax's copy)")


def bfloat16(lm: LanguageModel, texts: list[tuple[str, str]], fluent: np.ndarray) -> None:
    import torch

    half = LanguageModel(copy.deepcopy(lm.model).to(torch.bfloat16), lm.tokenizer, lm.source)
    flat = [t for pair in texts for t in pair][:120]
    for model, name in ((lm, "float32"), (half, "bfloat16")) * 2:
        start = time.perf_counter()
        model.log_probs(flat)
        print(f"{name}: {len(flat) / (time.perf_counter() - start):.1f} texts/s")
    scores = {}
    for model, name in ((lm, "float32"), (half, "bfloat16")):
        logp = np.array(model.log_probs([t for pair in texts for t in pair]))
        scores[name] = logp[1::2] - logp[0::2]
        print(f"{name}: {auc_text(scores[name], fluent)}")
    moved = np.abs(scores["bfloat16"] - scores["float32"])
    flipped = np.mean((scores["bfloat16"] >= 0) != (scores["float32"] >= 0))
    print(f"bfloat16 - float32: mean |change| {moved.mean():.2f} nats, max {moved.max():.2f}; "
          f"{flipped:.1%} of the pairs change side of 0 nats")


def windows(lm: LanguageModel, texts: list[tuple[str, str]], fluent: np.ndarray) -> None:
    ids = [(lm.token_ids(a), lm.token_ids(b)) for a, b in texts]
    for w in (None, 8, 4):
        seqs = []
        for a, b in ids:
            keep = common_suffix(a, b)
            seqs += [x if w is None else x[:len(x) - keep + w] for x in (a, b)]
        start = time.perf_counter()
        logp = np.array(sequence_log_probs(lm.model, seqs))
        seconds = time.perf_counter() - start
        print(f"window {'whole text' if w is None else w}: {sum(map(len, seqs))} tokens, {seconds:.1f} s, "
              f"{auc_text(logp[1::2] - logp[0::2], fluent)}")


def main() -> None:
    lm = language_model(resolve_settings(read_only=True))
    pairs = read_pairs()
    fluent = np.array([reading.fluent for _, reading in pairs])
    texts = [(reading.original_text, reading.perturbed_text) for _, reading in pairs]
    scorer_passes(lm, texts)
    bfloat16(lm, texts, fluent)
    windows(lm, texts, fluent)


if __name__ == "__main__":
    main()
