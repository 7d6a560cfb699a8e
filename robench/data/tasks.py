"""The built-in classification tasks: where their data lives, their fields, labels and AdvGLUE split.

Online users can pass `--data-source hub` to use the Hugging Face hub instead of the data directory.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from robench.core.errors import RobenchError
from robench.core.types import Split, Task
from robench.data import TASKS
from robench.data.loading import _every_kth, _glue_hub, _hub, _map_label_names, _read, _tsv

# --- local loaders (each reads exactly the files its Task declares in `data_files`) -----

SST2 = {"train": "sst2/train.tsv", "eval": "sst2/dev.tsv"}
RTE = {"train": "rte/train.tsv", "eval": "rte/dev.tsv"}
QNLI = "qnli/dev.tsv"
MR = ("mr/rt-polarity.neg", "mr/rt-polarity.pos")  # labels 0 and 1
AGNEWS = {"train": "ag_news/train_subset_alps.tsv", "eval": "ag_news/test.csv"}


def _sst2_local(root: Path, split: Split):
    ds = _tsv(root / SST2[split], raw_quotes=True)
    if "sentence" not in ds.column_names:
        return ds  # validate() reports the missing column
    return ds.map(lambda batch: {"sentence": [(s or "").strip() for s in batch["sentence"]]},
                  batched=True)  # GLUE keeps a trailing space; batched: 67k rows in 0.1 s, not 2 s


def _rte_local(root: Path, split: Split):
    return _tsv(root / RTE[split], raw_quotes=False)


def _qnli_local(root: Path, split: Split):
    ds = _tsv(root / QNLI, raw_quotes=True)
    ds = _map_label_names(ds, ("entailment", "not_entailment"), root / QNLI)
    return _every_kth(ds, 5, held_out=split == "eval")


def _mr_local(root: Path, split: Split):
    import datasets

    parts = []
    for label, name in enumerate(MR):
        ds = _read(root / name, "text", encoding="utf-8")
        parts.append(ds.map(lambda batch, label=label: {"text": [t.strip() for t in batch["text"]],
                                                       "label": [label] * len(batch["text"])}, batched=True))
    ds = datasets.concatenate_datasets(parts)
    return _every_kth(ds, 10, held_out=split == "eval")


AG_LABELS = ("World", "Sports", "Business", "Sci/Tech")


def _agnews_local(root: Path, split: Split):
    if split == "train":
        ds = _read(root / AGNEWS["train"], "csv", delimiter="\t", header=None, column_names=["text", "label_name"])
        return _map_label_names(ds, AG_LABELS, root / AGNEWS["train"], label="label_name")
    ds = _read(root / AGNEWS["eval"], "csv", header=None, column_names=["label", "title", "text"])
    return ds.map(lambda batch: {"label": [int(v) - 1 for v in batch["label"]],
                                 "text": [str(t).replace("\\", " ").strip() for t in batch["text"]]},
                  batched=True, remove_columns=["title"])  # batched, as every map here: a row at a time is 10x slower


def _register(task: Task) -> None:
    TASKS.register(task.name)(task)


_register(Task("sst2", ("sentence",), ("negative", "positive"), _sst2_local, _glue_hub("sst2"), advglue="sst2",
               data_files=tuple(SST2.values()),
               summary="SST-2 (GLUE): the sentiment of a movie-review sentence; AdvGLUE replay; offline"))
_register(Task("rte", ("sentence1", "sentence2"), ("entailment", "not_entailment"), _rte_local,
               _glue_hub("rte"), advglue="rte", data_files=tuple(RTE.values()),
               summary="RTE (GLUE): whether sentence1 entails sentence2; AdvGLUE replay; offline"))
_register(Task("qnli", ("question", "sentence"), ("entailment", "not_entailment"), _qnli_local,
               _glue_hub("qnli"), advglue="qnli",
               note="offline: only GLUE dev ships; rows with index % 5 != 0 train, the rest evaluate",
               data_files=(QNLI,),
               summary="QNLI (GLUE): whether the sentence answers the question; AdvGLUE replay; offline"))
_register(Task("mr", ("text",), ("negative", "positive"), _mr_local,
               lambda split: _hub("rotten_tomatoes", None, "train" if split == "train" else "test"),
               note="offline: every 10th sentence of each polarity file is held out for evaluation", data_files=MR,
               summary="MR (Pang and Lee, 2005): the sentiment of a Rotten Tomatoes snippet; offline"))
_register(Task("agnews", ("text",), AG_LABELS, _agnews_local,
               lambda split: _hub("ag_news", None, "train" if split == "train" else "test"),
               note="offline: train is the 10,001-row ALPS subset of AG train (descriptions only); "
                    "eval is the AG test set's descriptions", data_files=tuple(AGNEWS.values()),
               summary="AG News: the topic of a news article (world, sports, business, sci/tech); offline"))


def _hub_only(name: str) -> Callable[[Path, Split], object]:
    def local(root: Path, split: Split):
        raise RobenchError(f"task {name!r} has no offline data in shared/data; use --data-source hub when online")

    return local


_register(Task("mnli", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"), _hub_only("mnli"),
               _glue_hub("mnli", "validation_matched"), advglue="mnli",
               summary="MNLI (GLUE, matched dev): entailment, neutral or contradiction; AdvGLUE replay; hub only"))
_register(Task("mnli-mm", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"),
               _hub_only("mnli-mm"), _glue_hub("mnli", "validation_mismatched"), advglue="mnli-mm",
               summary="MNLI (GLUE, mismatched dev: other genres than training); AdvGLUE replay; hub only"))
_register(Task("qqp", ("question1", "question2"), ("not_duplicate", "duplicate"), _hub_only("qqp"),
               _glue_hub("qqp"), advglue="qqp",
               summary="QQP (GLUE): whether two Quora questions ask the same; AdvGLUE replay; hub only"))
