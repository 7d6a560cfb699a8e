"""studies/natural_fluency.py: swap positions, reading a filled study and scoring swaps, with fakes."""
from __future__ import annotations

import csv
import json
import random
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from study_scripts import load_study

from robench.core.errors import RobenchError
from robench.report.annotate import sheet_csv, sheet_rows
from robench.report.annotate_sheet import Example

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def study():
    return load_study("natural_fluency")


def example(original: str, perturbed: str) -> Example:
    return Example("/runs", "run-1", 0, "sst2", "textfooler", "budget=natural", "bert", ("negative", "positive"),
                   "positive", original, perturbed)


PAIRS = [  # original, adversarial, fluent
    ("the film falls short of a great ending .", "the movie falls short of an excellent ending .", True),
    ("it reduces the situation to a joke .", "it lowers the situation to a joke .", False),
    ("a sweet , funny film .", "a sweet , amusing film .", True),
    ("they make a mess of it .", "they do a mess of it .", False),
    ("a fine film .", "a fine little film .", True),  # a word added: no substitution, left out
]


def write_study(folder: Path) -> None:
    """A filled `robench annotate` study of PAIRS, as the export writes it and a reader fills it."""
    examples = [example(o, a) for o, a, _ in PAIRS]
    rows, items = sheet_rows(examples, random.Random(0))
    for row in rows:
        item = items[row["item"]]
        if "role" in item:
            row["label"] = "positive"
        else:
            row["meaning"], row["fluent"] = "4", "yes" if PAIRS[item["example"]][2] else "no"
    key = {"format": 1, "study": "s1", "seed": 0, "n": 10, "examples": [asdict(e) for e in examples],
           "items": items}
    folder.mkdir()
    (folder / "key.json").write_text(json.dumps(key), encoding="utf-8")
    (folder / "filled.csv").write_text(sheet_csv(rows), encoding="utf-8")


def test_swap_positions(study):
    assert study.swap_positions("the film is a great one".split(), "the Film is an excellent one".split()) == (4,)
    assert study.swap_positions("it reduces it".split(), "it lowers it".split()) == (1,)
    assert study.swap_positions("a b".split(), "a b c".split()) is None
    assert study.swap_positions("a b".split(), "a b".split()) == ()


def test_read_study_finds_each_pairs_swaps_and_verdict(study, tmp_path):
    write_study(tmp_path / "s")
    pairs, left_out = study.read_study(tmp_path / "s")
    assert left_out == 1
    by_text = {" ".join(p.swaps[0].words): p for p in pairs}
    first = by_text["the movie falls short of an excellent ending"]
    assert first.fluent and first.attack == "textfooler"
    assert [(s.original, s.candidate) for s in first.swaps] == [("film", "movie"), ("great", "excellent")]
    assert first.swaps[1].original_words == tuple("the movie falls short of an great ending".split())
    assert not by_text["it lowers the situation to a joke"].fluent
    assert sorted((s.original, s.candidate) for p in pairs for s in p.swaps) == sorted(
        [("film", "movie"), ("great", "excellent"), ("reduces", "lowers"), ("funny", "amusing"), ("make", "do")])


def test_read_study_refuses_an_incomplete_sheet(study, tmp_path):
    write_study(tmp_path / "s")
    lines = (tmp_path / "s" / "filled.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "s" / "filled.csv").write_text("".join(lines[:-1]), encoding="utf-8")
    with pytest.raises(RobenchError, match="missing from the sheet"):
        study.read_study(tmp_path / "s")


def fake_scorer(swaps):
    """Fluent-looking when the candidate is in a list of 'good' words."""
    good = {"movie": 1.0, "amusing": 0.9, "excellent": 0.4, "lowers": 0.3, "do": 0.1}
    return {"fake": np.array([good[s.candidate] for s in swaps])}


def test_scores_by_worst_swap_auc_and_keep_at_the_median(study, tmp_path):
    write_study(tmp_path / "s")
    pairs, _ = study.read_study(tmp_path / "s")
    scored = study.score_pairs(pairs, [fake_scorer])
    worst = {" ".join(p.swaps[0].words): float(s.min()) for p, s in zip(pairs, scored["fake"])}
    assert worst["the movie falls short of an excellent ending"] == 0.4  # its worse swap
    (row,) = study.signal_table(pairs, scored)
    # fluent pairs score 0.4 and 0.9, the others 0.3 and 0.1: fully separated
    assert row.auc == 1.0 and row.auc_one_swap == 1.0
    assert row.threshold == 0.4 and row.swaps_kept == 0.6  # the median of 1.0, 0.4, 0.3, 0.9, 0.1
    assert row.pairs_kept == 2 and row.precision == 1.0 and row.recall == 1.0
    table = study.report(pairs, scored)
    assert "| fake | 1.00 [1.00, 1.00] | 1.00 | 0.4 | 60% | 2 of 4 | 100% | 100% |" in table
    out = tmp_path / "swaps.csv"
    study.write_swaps(out, pairs, scored)
    assert len(list(csv.DictReader(out.open()))) == 5


def test_roc_auc_counts_ties_half_and_needs_both_classes(study):
    assert study.roc_auc(np.array([1.0, 1.0, 0.0]), np.array([True, False, False])) == 0.75
    assert np.isnan(study.roc_auc(np.array([1.0]), np.array([True])))


def test_mean_rank_combines_percentile_ranks(study):
    scored = {"a": [np.array([1.0, 3.0]), np.array([2.0])], "b": [np.array([30.0, 10.0]), np.array([20.0])]}
    combined = study.mean_rank(scored, ("a", "b"))
    assert [c.tolist() for c in combined] == [pytest.approx([2 / 3, 2 / 3]), pytest.approx([2 / 3])]


def test_bigrams_leave_out_read_texts_and_prefer_the_seen_neighbour(study):
    lines = ["he makes a mistake", "she makes a mistake", "it reduces the cost of living here now",
             "they do the dishes"]
    read = study.read_ngrams([study.read_pair("x", True, "it reduces the cost of living here now",
                                              "it lowers the cost of living here now")])
    counts = study.Bigrams.count(lines, read)
    assert counts.bigrams[("reduces", "the")] == 0 and counts.bigrams[("makes", "a")] == 2
    words = ("they", "make", "a", "mistake")
    assert counts.window_log_prob(words, 1, "makes") > counts.window_log_prob(words, 1, "do")


def test_frequency_prefers_the_commoner_word(study):
    swap = study.Swap(("it", "starts", "now"), 1, "begins")
    assert study.frequency_scorer({"it": 1, "starts": 5, "begins": 50})([swap])["frequency log-ratio"][0] > 0


def test_masked_lm_logprobs_on_a_tiny_random_model(study, tiny_mlm):
    import torch
    from transformers import AutoTokenizer, BertForMaskedLM

    model, tokenizer = BertForMaskedLM.from_pretrained(tiny_mlm).eval(), AutoTokenizer.from_pretrained(tiny_mlm)
    words = ("the", "film", "is", "great")
    logp, rank = study.word_logprobs(model, tokenizer, [(words, 3, "great"), (words, 3, "unforgettable")], False)
    assert len(tokenizer.tokenize("unforgettable")) > 1
    for word, lp, rk in zip(("great", "unforgettable"), logp, rank):  # the same by hand: k masks, all pieces
        pieces = tokenizer.tokenize(word)
        text = "the film is " + " ".join([tokenizer.mask_token] * len(pieces))
        batch = tokenizer(text, return_tensors="pt")
        with torch.inference_mode():
            scores = torch.log_softmax(model(**batch).logits[0], dim=-1)
        at = (batch["input_ids"][0] == tokenizer.mask_token_id).nonzero()[:, 0].tolist()
        ids = tokenizer.convert_tokens_to_ids(pieces)
        assert lp == pytest.approx(sum(float(scores[p, i]) for p, i in zip(at, ids)), abs=1e-4)
        assert rk == 1 + int((scores[at[0]] > scores[at[0], ids[0]]).sum())
    first, _ = study.word_logprobs(model, tokenizer, [(words, 3, "unforgettable")], True)
    assert first[0] != pytest.approx(logp[1])  # one mask, the first piece only
    swaps = [study.Swap(words, 3, "good")]
    signals = study.masked_lm_scorer(model, tokenizer)(swaps)
    assert set(signals) == {"MLM log-ratio, whole word", "MLM log-ratio, first piece", "MLM rank, first piece"}


def test_report_per_attack_and_pooled(study):
    words = ("a", "b")
    pairs = [study.ReadPair(attack, fluent, (study.Swap(words, 1, "c"),))
             for attack in ("textfooler", "bert-attack") for fluent in (True, False)]
    scored = {"fake": [np.array([1.0]), np.array([0.0]), np.array([0.0]), np.array([1.0])]}
    table = study.report(pairs, scored)
    assert [line.split(":")[0] for line in table.splitlines() if line.startswith("###")] == [
        "### textfooler", "### bert-attack", "### all attacks"]
    assert "| fake | 1.00 [1.00, 1.00] |" in table and "| fake | 0.00 [0.00, 0.00] |" in table
