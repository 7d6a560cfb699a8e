"""Hand-read validity of TextFooler's successful swaps, and what offline signals can tell (docs/studies/attacks.md,
"Reading the swaps"). Writes results/evidence-cpu/swap-reading/measure.json.

    ROBENCH_DATA_DIR=/path/to/shared/data python studies/swap_reading_measure.py

`swaps.tsv`: 160 distinct (old, new) swaps drawn at random (seed 0, first occurrence of each pair) from the
successful examples of the 12 TextFooler records in results/evidence-cpu/attack-validity (the `lexicon`
source, textdefender budget, before the part-of-speech-in-context check), each read by one reader (the lead
engineer) in its sentence, before any signal below was computed, as `keeps` (same meaning in context),
`grammar` (same meaning, ungrammatical: "as we journey" -> "as we trips") or `changes` (another meaning or
none: "a witty script" -> "a spiritual script"). Every one of them is a listed synonym or inflection under the
audit. Signals, scored against keeps-or-grammar vs changes:

* `wordnet_pos`: robench.engine.constraints.WordNetPos on the word's tag in the original sentence (the
  perceptron tagger, universal tags), i.e. the filter textfooler now applies;
* contextual cosine: the packaged MiniLM's hidden states (layers 2, 4, 6) at the word, mean over its word
  pieces, the original sentence against the sentence with only this swap;
* the synonym table's cosine (the counter-fitted GloVe-50d space the `lexicon` source ranks with);
* how many of the three lists (Alzantot, PPDB, WordNet) name the pair; and, over every successful swap of the
  12 records (not only the ones read), which lists name it.
"""
import csv
import json
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from transformers import AutoModel

from robench.classifier.backbone import load_tokenizer, resolve_backbone
from robench.core.packed import runs_to_read
from robench.core.paths import resolve_settings
from robench.engine.constraints import WordNetPos
from robench.engine.resources import pos_tagger, synonym_table
from robench.engine.resources.lexicon import lexicon

EVIDENCE = Path(__file__).resolve().parents[1] / "results" / "evidence-cpu"
HERE = EVIDENCE / "swap-reading"


def hidden(model, tokenizer, words: list[str], i: int) -> list[torch.Tensor]:
    enc = tokenizer(words, is_split_into_words=True, return_tensors="pt", truncation=True, max_length=128)
    with torch.inference_mode():
        states = model(**enc, output_hidden_states=True).hidden_states
    pieces = [t for t, w in enumerate(enc.word_ids()) if w == i]
    return [states[layer][0, pieces].mean(0) for layer in (2, 4, 6)]


def lists_naming_every_swap(lex) -> dict:
    """Share of all successful TextFooler swaps of the 12 attack-validity records by the lists that name them."""
    from robench.engine.audit import swaps

    names: Counter = Counter()
    for path in sorted(runs_to_read(EVIDENCE / "attack-validity").glob("sst2-*-textfooler-*.csv")):
        record = json.loads(path.with_suffix(".json").read_text())
        if record["hyperparameters"]["attack"].get("budget") != "textdefender":
            continue
        for row in csv.DictReader(path.open(encoding="utf-8")):
            if row["status"] == "successful":
                for old, new in swaps(row["original_text"], row["perturbed_text"]) or []:
                    named = [s for s in ("alzantot", "ppdb", "wordnet") if new.lower() in lex.synonyms_of(old.lower(),
                                                                                                        (s,))]
                    names["+".join(named) or "none"] += 1
    total = sum(names.values())
    return {"swaps": total, "by_lists": {k: v / total for k, v in names.most_common()},
            "named_by_two_or_more": sum(v for k, v in names.items() if "+" in k) / total}


def rule(keep: np.ndarray, valid: np.ndarray) -> dict:
    return {"kept": float(keep.mean()), "valid_among_kept": float(valid[keep].mean()),
            "valid_kept": float(keep[valid].mean()), "changes_removed": float(1 - keep[~valid].mean())}


def main() -> None:
    torch.set_num_threads(1)
    settings = resolve_settings()
    lex, tagger, table = lexicon(settings), pos_tagger(settings), synonym_table(settings, "lexicon")
    senses = WordNetPos(lex.wordnet)
    backbone = resolve_backbone("minilm")
    tokenizer, model = load_tokenizer(backbone.location), AutoModel.from_pretrained(backbone.location).eval()
    rows = list(csv.DictReader((HERE / "swaps.tsv").open(encoding="utf-8"), delimiter="\t"))
    valid = np.array([r["label"] != "changes" for r in rows])
    pos_ok, ctx, cos, lists = [], [], [], []
    for r in rows:
        words, i = r["original_text"].split(" "), int(r["word_index"])
        old, new = r["old"].lower(), r["new"].lower()
        pos_ok.append(senses(tagger.tag(words)[i], new))
        swapped = words[:i] + [r["new"]] + words[i + 1:]
        ctx.append([float(torch.cosine_similarity(a, b, dim=0))
                    for a, b in zip(hidden(model, tokenizer, words, i), hidden(model, tokenizer, swapped, i))])
        cos.append(table.cos(old, new) if table.cos(old, new) is not None else -1.0)
        lists.append(sum(new in lex.synonyms_of(old, (s,)) for s in ("alzantot", "ppdb", "wordnet")))
    pos_ok, ctx = np.array(pos_ok), np.array(ctx)
    out = {"swaps": len(rows), "labels": dict(Counter(r["label"] for r in rows)),
           "wordnet_pos": rule(pos_ok, valid),
           "auc": {"context_cos_layer2": roc_auc_score(valid, ctx[:, 0]),
                   "context_cos_layer4": roc_auc_score(valid, ctx[:, 1]),
                   "context_cos_layer6": roc_auc_score(valid, ctx[:, 2]),
                   "table_cos": roc_auc_score(valid, cos), "lists_naming_the_pair": roc_auc_score(valid, lists)},
           "context_cos_layer6_at": {str(t): rule(ctx[:, 2] >= t, valid) for t in (0.5, 0.6, 0.7, 0.8)},
           "wordnet_pos_and_context_cos_layer6_at": {str(t): rule(pos_ok & (ctx[:, 2] >= t), valid)
                                                     for t in (0.5, 0.6)},
           "table_cos_at": {str(t): rule(np.array(cos) >= t, valid) for t in (0.8, 0.9)},
           "every_swap": lists_naming_every_swap(lex)}
    (HERE / "measure.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
