"""The sense filter (robench.engine.sense) and its labelled development set (studies/data/sense-dev.csv)."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from study_scripts import load_study

from robench.engine.constraints import ContextSimilarity, Swap

REPO = Path(__file__).resolve().parents[1]
SET = REPO / "studies" / "data" / "sense-dev.csv"


def sense_eval():
    return load_study("sense_eval")


def read_set() -> list[dict]:
    with SET.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_development_set_is_balanced_labelled_swaps_of_sst2_dev_sentences(shared_data):
    rows = read_set()
    dev_sentences = [line.split("\t")[0].strip()
                     for line in (shared_data / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    assert len(rows) >= 200 and {r["sense_kept"] for r in rows} == {"yes", "no"}
    for split in ("dev", "test"):
        labels = [r["sense_kept"] for r in rows if r["split"] == split]
        assert labels.count("yes") == labels.count("no")
    assert sum(r["split"] == "test" for r in rows) == len(rows) // 3
    assert len({(r["original"], r["candidate"]) for r in rows}) == len(rows)
    for r in rows:
        words = r["sentence"].split()
        assert words[int(r["position"])] == r["original"] and r["candidate"].lower() != r["original"].lower()
        assert dev_sentences[int(r["sst2_dev_index"])] == r["sentence"]


def test_sense_constraint_is_the_context_check_at_its_threshold(monkeypatch, settings):
    import robench.engine.resources.context as context
    from robench.engine.sense import SENSE_MIN_COS, sense_constraint

    asked = []

    class Scorer:
        def scores(self, words, i, replacements):
            asked.append((i, list(replacements)))
            return np.array([SENSE_MIN_COS + 0.01, SENSE_MIN_COS - 0.01], dtype=np.float32)

    monkeypatch.setattr(context, "context_similarity", lambda s, device: Scorer())
    check = sense_constraint(settings, "cpu")
    words = sense_eval().as_words("a witty script by heather mcgowan")
    kept = check.filter(words, words, [Swap(2, "screenplay"), Swap(2, "hand")])
    assert isinstance(check, ContextSimilarity) and kept == [Swap(2, "screenplay")]
    assert asked == [(2, ["screenplay", "hand"])]


@pytest.mark.integration
def test_the_chosen_filter_runs_on_a_slice_of_the_set(shared_data):
    """The real filter on 16 held-out swaps, one word at a time: it keeps exactly those whose contextual cosine
    reaches the threshold, and its precision and recall on the slice are computed from the labels."""
    from robench.core.paths import resolve_settings
    from robench.engine.sense import SENSE_MIN_COS, sense_constraint

    study = sense_eval()
    settings = resolve_settings(shared_data)
    rows = [r for r in read_set() if r["split"] == "test"][:16]
    check = sense_constraint(settings, "cpu")
    scores = study.context_scores(rows, check.scorer)
    keep = np.array([bool(check.filter(w, w, [Swap(int(r["position"]), r["candidate"])]))
                     for r in rows for w in [study.as_words(r["sentence"])]])
    assert np.all((scores >= -1) & (scores <= 1 + 1e-5))
    assert keep.tolist() == (scores >= SENSE_MIN_COS).tolist()
    kept = np.array([r["sense_kept"] == "yes" for r in rows])
    values = study.precision_recall(keep, kept)
    assert len(values) == 4 and all(np.isnan(v) or 0 <= v <= 1 for v in values)
