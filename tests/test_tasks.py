import json

import pytest

from robench.core.errors import RobenchError
from robench.data import TASKS
from robench.data.loading import column, load_advglue, load_split, subset, texts_of


@pytest.mark.parametrize("name,train,eval_", [("sst2", 67349, 872), ("rte", 2490, 277), ("qnli", 4370, 1093),
                                              ("mr", 9595, 1067), ("agnews", 10001, 7600)])
def test_offline_tasks_load_with_their_fields(shared_data, name, train, eval_):
    task = TASKS.get(name)
    tr, ev = load_split(task, "train", shared_data, "local"), load_split(task, "eval", shared_data, "local")
    assert (len(tr), len(ev)) == (train, eval_)
    assert tr.column_names == [*task.text_fields, "label"]
    assert set(ev["label"]) == set(range(task.num_labels))


def test_qnli_keeps_quotes_verbatim(shared_data):
    dev = load_split(TASKS.get("qnli"), "eval", shared_data, "local")
    assert any(s.endswith('"Wise up or die."') for s in dev["sentence"])  # QUOTE_NONE: quotes are text


@pytest.mark.parametrize("name,split,n", [("sst2", "sst2", 148), ("rte", "rte", 81), ("qnli", "qnli", 148)])
def test_advglue_splits(shared_data, name, split, n):
    task = TASKS.get(name)
    assert task.advglue == split
    adv = load_advglue(task, shared_data, "local")
    assert len(adv) == n and adv.column_names == [*task.text_fields, "label"]


def test_advglue_mapping_covers_glue_tasks():
    assert {t: TASKS.get(t).advglue for t in ("mnli", "mnli-mm", "qqp")} == {"mnli": "mnli", "mnli-mm": "mnli-mm",
                                                                             "qqp": "qqp"}


def test_task_without_advglue_split(shared_data):
    with pytest.raises(RobenchError, match="no AdvGLUE split"):
        load_advglue(TASKS.get("agnews"), shared_data, "local")


def test_subset_is_deterministic_by_seed(shared_data):
    dev = load_split(TASKS.get("sst2"), "eval", shared_data, "local")
    a, b, c = subset(dev, 50, 1), subset(dev, 50, 1), subset(dev, 50, 2)
    assert texts_of(a, TASKS.get("sst2")) == texts_of(b, TASKS.get("sst2"))
    assert texts_of(a, TASKS.get("sst2")) != texts_of(c, TASKS.get("sst2"))
    assert len(subset(dev, None, 0)) == len(dev)


def test_column_is_a_plain_list_in_the_selection_s_order():
    """`column` reads a column through Arrow (iterating a datasets Column formats every row: seconds for SST-2's
    67k), as a list that keeps a selection's rows and order."""
    from datasets import Dataset

    ds = Dataset.from_dict({"sentence": ["a", "b", "c", "d"], "label": [0, 1, 0, 1]})
    picked = ds.select([3, 0, 2])
    assert column(picked, "sentence") == ["d", "a", "c"] and column(picked, "label") == [1, 0, 0]
    assert type(column(ds, "label")) is list and texts_of(picked, TASKS.get("sst2")) == [("d",), ("a",), ("c",)]


def _data_dir(tmp_path, train: str, dev: str = "sentence\tlabel\nfine .\t1\n"):
    (tmp_path / "sst2").mkdir()
    (tmp_path / "sst2" / "train.tsv").write_text(train)
    (tmp_path / "sst2" / "dev.tsv").write_text(dev)
    return tmp_path


def test_empty_data_file(tmp_path):
    root = _data_dir(tmp_path, "sentence\tlabel\n")
    with pytest.raises(RobenchError, match="empty"):
        load_split(TASKS.get("sst2"), "train", root, "local")


def test_wrong_label_set(tmp_path):
    root = _data_dir(tmp_path, "sentence\tlabel\ngood .\t1\nbad .\t7\n")
    with pytest.raises(RobenchError, match="outside the task's label set"):
        load_split(TASKS.get("sst2"), "train", root, "local")


def test_missing_columns(tmp_path):
    root = _data_dir(tmp_path, "text\ty\ngood .\t1\n")
    with pytest.raises(RobenchError, match="missing columns"):
        load_split(TASKS.get("sst2"), "train", root, "local")


def test_malformed_file(tmp_path):
    (tmp_path / "advglue").mkdir()
    (tmp_path / "advglue" / "dev.json").write_text("{not json")
    with pytest.raises(RobenchError, match="malformed data file"):
        load_advglue(TASKS.get("sst2"), tmp_path, "local")


def test_missing_file(tmp_path):
    with pytest.raises(RobenchError, match="missing data file"):
        load_split(TASKS.get("rte"), "train", tmp_path, "local")


def test_hub_only_task_offline(tmp_path):
    with pytest.raises(RobenchError, match="no offline data"):
        load_split(TASKS.get("mnli"), "train", tmp_path, "local")


def test_advglue_empty_split(tmp_path):
    (tmp_path / "advglue").mkdir()
    (tmp_path / "advglue" / "dev.json").write_text(json.dumps({"sst2": []}))
    with pytest.raises(RobenchError):
        load_advglue(TASKS.get("sst2"), tmp_path, "local")
