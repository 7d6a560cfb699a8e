"""Benchmarking a model robench did not train: `run --checkpoint`, `robench.evaluate`, tasks from files, `show`."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import tiny_spec

import robench
from robench.cli import main

DATA = Path(__file__).resolve().parent / "data"
TEXTFOOLER = {"synonym_source": "neighbors", "concurrency": 6}


def save_classifier(backbone: Path, path: Path, id2label: dict[int, str] | None, seed: int = 0) -> Path:
    """The tiny random BERT as a sequence classifier, saved with save_pretrained (with its tokenizer)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(seed)
    labels = {"id2label": id2label, "label2id": {v: k for k, v in id2label.items()}} if id2label else {}
    model = AutoModelForSequenceClassification.from_pretrained(backbone, num_labels=len(id2label or [0, 1]),
                                                               **labels)
    model.save_pretrained(path, safe_serialization=True)
    AutoTokenizer.from_pretrained(backbone).save_pretrained(path)
    return path


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, " ".join(out.err.split())


def _record(settings, out: str) -> dict:
    path = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("record: "))
    assert Path(path).parent == settings.runs_dir
    return json.loads(Path(path).read_text())


def _dev_accuracy(checkpoint: Path, settings) -> float:
    """The saved classifier's accuracy on the tiny SST-2 dev split, computed here, independently of the run."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from robench.data import TASKS
    from robench.data.loading import load_split

    dev = load_split(TASKS.get("sst2"), "eval", settings.data_dir, "local")
    model = AutoModelForSequenceClassification.from_pretrained(checkpoint).eval()
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    with torch.inference_mode():
        logits = model(**tokenizer(list(dev["sentence"]), padding=True, truncation=True, max_length=128,
                                   return_tensors="pt")).logits
    return float((logits.argmax(-1) == torch.tensor(dev["label"])).float().mean())


# --- checkpoints --------------------------------------------------------------------

def test_checkpoint_saved_with_save_pretrained_is_attacked_without_training(capsys, settings, where, tiny_backbone,
                                                                              tmp_path):
    ckpt = save_classifier(tiny_backbone, tmp_path / "my-model", {0: "NEGATIVE", 1: "Positive"})
    code, out, err = _cli(capsys, "run", "--checkpoint", ckpt, "--attack", "advglue", "--task", "sst2",
                          "--eval-size", 8, *where)
    assert code == 0, err
    record = _record(settings, out)
    sha = record["spec"]["checkpoint"]["weights_sha256"]
    assert record["spec"]["model"] == f"checkpoint:my-model@{sha[:8]}" and len(sha) == 64
    assert record["resources"]["model"]["label_order"] == [0, 1] and record["timings"]["train_seconds"] is None
    assert record["hyperparameters"]["train"] == {"max_length": 128}
    assert record["metrics"]["examples"] == 8
    assert record["metrics"]["dev_accuracy"] == pytest.approx(_dev_accuracy(ckpt, settings))  # the given model's
    assert not settings.checkpoints_dir.exists()  # nothing was fine-tuned

    assert _cli(capsys, "leaderboard", "--results-dir", settings.results_dir)[0] == 0
    board = (settings.results_dir / "settings.md").read_text()  # one row per setting
    assert f"| sst2 | checkpoint:my-model@{sha[:8]} | advglue | bert | – |" in board
    board = (settings.results_dir / "leaderboard.md").read_text()  # one row per checkpoint
    assert f"| sst2 | 1 | checkpoint:my-model@{sha[:8]} | default | bert | – | 1 |" in board


def test_different_weights_at_the_same_path_never_share_a_run_id(settings, tiny_backbone, tmp_path):
    from robench.runs.given import checkpoint_fields
    from robench.runs.spec import RunSpec

    path = tmp_path / "model"
    ids = []
    for seed in (0, 1):
        shutil.rmtree(path, ignore_errors=True)
        save_classifier(tiny_backbone, path, {0: "negative", 1: "positive"}, seed=seed)
        ids.append(RunSpec(task="sst2", **checkpoint_fields(str(path), cache_dir=settings.cache_dir)).run_id)
    assert ids[0] != ids[1]
    again = RunSpec(task="sst2", **checkpoint_fields(str(path), cache_dir=settings.cache_dir)).run_id
    assert again == ids[1]  # the cached hash is reused while the files are unchanged


# bert is attacked by textfooler, whose real resources make it an integration test
@pytest.mark.parametrize("model", [pytest.param("bert", marks=pytest.mark.integration), "imbert"])
def test_a_robench_checkpoint_through_checkpoint_gives_the_training_runs_metrics(capsys, settings, where,
                                                                                 tiny_backbone, model):
    attack = "textfooler" if model == "bert" else "advglue"
    params = TEXTFOOLER if attack == "textfooler" else {}
    spec = tiny_spec(tiny_backbone, model=model, attack=attack, train_size=32, eval_size=6, attack_params=params)
    trained = robench.run(spec, settings, device="cpu")
    flags = [f for key, value in params.items() for f in ("--attack-param", f"{key}={value}")]
    code, out, err = _cli(capsys, "run", "--checkpoint", trained.checkpoint, "--attack", attack, "--task", "sst2",
                          "--eval-size", 6, "--max-length", 32, *flags, *where)
    assert code == 0, err
    attacked = _record(settings, out)
    assert attacked["run_id"] != trained.run_id and attacked["spec"]["backbone"] == model
    assert attacked["metrics"] == trained.metrics
    csv = settings.runs_dir / f"{trained.run_id}.csv"
    assert (settings.runs_dir / f"{attacked['run_id']}.csv").read_text() == csv.read_text()


@pytest.mark.parametrize("id2label,extra,message", [
    ({0: "LABEL_0", 1: "LABEL_1"}, [], "names its labels generically (LABEL_0, LABEL_1); say which is which: "
                                        "pass --label-map 0=negative,1=positive"),
    ({0: "a", 1: "b", 2: "c"}, [], "has 3 output labels (a, b, c) but task 'sst2' has 2 (negative, positive)"),
    ({0: "positive", 1: "Positive"}, [], "does not match task 'sst2''s labels (negative, positive) one to one"),
    ({0: "bad", 1: "good"}, [], "id2label (bad, good) does not match"),
    ({0: "LABEL_0", 1: "LABEL_1"}, ["--label-map", "0=negative"], "name every output 0..1 once"),
    ({0: "LABEL_0", 1: "LABEL_1"}, ["--label-map", "0=neg,1=pos"], "label map (neg, pos) does not match"),
    ({0: "LABEL_0", 1: "LABEL_1"}, ["--label-map", "zero=negative"], "expected OUTPUT=LABEL pairs"),
    ({0: "negative", 1: "positive"}, ["--model", "imbert"], "--checkpoint attacks a trained model as it is"),
])
def test_label_map_errors(capsys, where, tiny_backbone, tmp_path, id2label, extra, message):
    ckpt = save_classifier(tiny_backbone, tmp_path / "ckpt", id2label)
    code, _, err = _cli(capsys, "run", "--checkpoint", ckpt, "--task", "sst2", *extra, *where)
    assert code == 2 and err.startswith("robench: error:") and message in err, err


def test_label_map_without_checkpoint_and_missing_checkpoint(capsys, where, tmp_path):
    assert "use it with --checkpoint" in _cli(capsys, "run", "--label-map", "0=negative,1=positive", *where)[2]
    assert "is not a directory" in _cli(capsys, "run", "--checkpoint", tmp_path / "nope", *where)[2]
    (tmp_path / "empty").mkdir()
    assert "has no config.json" in _cli(capsys, "run", "--checkpoint", tmp_path / "empty", *where)[2]


def test_outputs_are_reordered_into_the_tasks_label_order(settings, tiny_backbone, tmp_path):
    from robench.data import TASKS
    from robench.runs.given import checkpoint_label_order, load_victim

    sst2 = TASKS.get("sst2")
    straight = save_classifier(tiny_backbone, tmp_path / "a", {0: "negative", 1: "positive"})
    swapped = save_classifier(tiny_backbone, tmp_path / "b", {0: "positive", 1: "negative"})
    generic = save_classifier(tiny_backbone, tmp_path / "c", None)
    assert checkpoint_label_order(str(swapped), sst2, None) == (1, 0)
    assert checkpoint_label_order(str(generic), sst2, {0: "Positive", 1: "negative"}) == (1, 0)
    (generic / "training.json").write_text(json.dumps({"task": "sst2"}))  # an older robench checkpoint of sst2
    assert checkpoint_label_order(str(generic), sst2, None) == (0, 1)
    texts = [("a gorgeous film",), ("a dull mess",)]
    plain = load_victim(straight, torch.device("cpu")).predict_proba(texts)
    mapped = load_victim(swapped, torch.device("cpu"), label_order=(1, 0)).predict_proba(texts)
    np.testing.assert_array_equal(mapped, plain[:, ::-1])


# --- tasks from files ---------------------------------------------------------------

@pytest.mark.integration  # textfooler's real sentence encoder
def test_csv_task_one_line_with_checkpoint_end_to_end(capsys, settings, where, tiny_backbone, tmp_path):
    ckpt = save_classifier(tiny_backbone, tmp_path / "reviews-model", None)
    task = ["--task", f"csv:{DATA / 'reviews.csv'}", "--text-column", "review", "--label-column", "stars",
            "--labels", "neg,pos"]
    code, _, err = _cli(capsys, "run", *task, "--attack", "textfooler", *where)
    assert code == 2 and "task 'reviews' has no train file" in err and "--checkpoint" in err
    flags = [f for key, value in TEXTFOOLER.items() for f in ("--attack-param", f"{key}={value}")]
    code, out, err = _cli(capsys, "run", *task, "--checkpoint", ckpt, "--label-map", "0=neg,1=pos", "--attack",
                          "textfooler", "--eval-size", 6, *flags, *where)
    assert code == 0, err
    record = _record(settings, out)
    source = record["spec"]["task_source"]
    assert record["spec"]["task"] == "reviews" and source["text_columns"] == ["review"]
    assert source["sha256"]["eval"] == record["resources"]["data"]["sha256"]["eval"]
    assert len(source["sha256"]["eval"]) == 64 and record["metrics"]["examples"] == 6
    assert record["metrics"]["skipped"] + record["metrics"]["failed"] + record["metrics"]["successful"] == 6

    code, shown, err = _cli(capsys, "show", record["run_id"][:30], "--results-dir", settings.results_dir)
    assert code == 0, err
    assert record["run_id"] in " ".join(shown.split()) and "neg" in shown


@pytest.mark.integration  # textfooler's real sentence encoder
def test_sentence_pair_jsonl_task_file_trains_and_attacks_the_hypothesis(settings, tiny_backbone):
    spec = tiny_spec(tiny_backbone, attack="textfooler", eval_size=4, attack_params=TEXTFOOLER)
    record = robench.run(_file_spec(spec, str(DATA / "pairs.toml"), settings), settings, device="cpu")
    assert record.spec["task"] == "pairs" and record.metrics["examples"] == 4 and record.metrics["errors"] == 0
    rows = (settings.runs_dir / f"{record.run_id}.csv").read_text()
    assert " [SEP] " in rows  # premise [SEP] hypothesis
    from robench.report.examples import load_run

    for e in load_run(settings.runs_dir, record.run_id).examples:
        assert e.perturbed_text.split(" [SEP] ")[0] == e.original_text.split(" [SEP] ")[0]  # premise untouched


def _file_spec(spec, task: str, settings, **columns):
    import dataclasses

    from robench.data.file_tasks import file_task_definition

    definition = file_task_definition(task, cache_dir=settings.cache_dir, **columns)
    return dataclasses.replace(spec, task=definition["name"], task_source=definition)


def test_task_file_replay_and_the_data_fingerprint(settings, tiny_backbone, tmp_path):
    shutil.copy(DATA / "reviews.csv", tmp_path / "reviews.csv")
    (tmp_path / "adv.csv").write_text("review,stars\n\"A warm, funy and beautifuly acted film.\",pos\n"
                                      "The plot is dul and the jokes fall flt.,neg\n")
    (tmp_path / "task.toml").write_text('train = "reviews.csv"\neval = "reviews.csv"\nreplay = "adv.csv"\n'
                                        'text_columns = "review"\nlabel_column = "stars"\nlabels = ["neg", "pos"]\n')
    spec = _file_spec(tiny_spec(tiny_backbone, attack="advglue"), str(tmp_path / "task.toml"), settings)
    record = robench.run(spec, settings, device="cpu")
    assert record.spec["task"] == "task" and record.metrics["examples"] == 2
    with open(tmp_path / "reviews.csv", "a") as fh:
        fh.write("41,An extra row changes the data.,pos\n")
    changed = _file_spec(tiny_spec(tiny_backbone, attack="advglue"), str(tmp_path / "task.toml"), settings)
    assert changed.run_id != spec.run_id
    assert changed.task_source["sha256"]["eval"] != spec.task_source["sha256"]["eval"]


@pytest.mark.parametrize("csv_text,columns,message", [
    ("review,label\nfine film,pos\n", {}, "missing label column 'stars'"),
    ("text,stars\nfine film,pos\n", {}, "missing columns ['review']"),
    ("review,stars\nfine film,pos\n,neg\n", {}, "empty or missing 'review' text in rows [1]"),
    ("review,stars\nfine film,pos\nawful,meh\n", {}, "labels ['meh'] in column 'stars' are outside"),
    ("review,stars\nfine film,1\nawful,5\n", {}, "labels [5] are outside the task's label set"),
    ("review,stars\n", {}, "data.csv has no rows"),
])
def test_file_tasks_are_validated_like_built_in_tasks(capsys, where, tiny_backbone, tmp_path, csv_text, columns,
                                                      message):
    (tmp_path / "data.csv").write_text(csv_text)
    ckpt = save_classifier(tiny_backbone, tmp_path / "ckpt", {0: "neg", 1: "pos"})
    code, _, err = _cli(capsys, "run", "--task", f"csv:{tmp_path / 'data.csv'}", "--text-column", "review",
                        "--label-column", "stars", "--labels", "neg,pos", "--checkpoint", ckpt, *where)
    assert code == 2 and err.startswith("robench: error:") and message in err, err


@pytest.mark.parametrize("toml,message", [
    ('eval = "missing.csv"\ntext_columns = "t"\nlabel_column = "l"\nlabels = ["a", "b"]', "does not exist"),
    ('eval = "data.bin"\ntext_columns = "t"\nlabel_column = "l"\nlabels = ["a", "b"]', "cannot tell the format"),
    ('eval = "data.csv"\ntext_column = "t"\nlabel_column = "l"\nlabels = ["a", "b"]', "unknown keys ['text_column']"),
    ('eval = "data.csv"\ntext_columns = ["a", "b", "c"]\nlabel_column = "l"\nlabels = ["a", "b"]', "two for sentence"),
    ('eval = "data.csv"\ntext_columns = "t"\nlabel_column = "l"\nlabels = ["a"]', "at least two distinct"),
    ('eval = "data.parquet"\ntext_columns = "t"\nlabel_column = "l"\nlabels = ["a", "b"]', "malformed data file"),
    ("eval = [", "is not valid TOML"),
])
def test_bad_task_files(capsys, where, tiny_backbone, tmp_path, toml, message):
    (tmp_path / "data.csv").write_text("t,l\nx,a\n")
    (tmp_path / "data.bin").write_text("t,l\nx,a\n")
    (tmp_path / "data.parquet").write_bytes(b"not parquet at all")
    (tmp_path / "task.toml").write_text(toml)
    ckpt = save_classifier(tiny_backbone, tmp_path / "ckpt", {0: "a", 1: "b"})
    code, _, err = _cli(capsys, "run", "--task", tmp_path / "task.toml", "--checkpoint", ckpt, *where)
    assert code == 2 and message in err, err


def test_column_flags_need_a_file_task(capsys, where):
    code, _, err = _cli(capsys, "run", "--task", "sst2", "--text-column", "review", *where)
    assert code == 2 and "use them with --task csv:FILE" in err


# --- robench.evaluate -----------------------------------------------------------------

def test_the_same_weights_by_path_in_memory_and_on_the_cli_are_one_run_and_one_row(capsys, settings, where,
                                                                                    tiny_backbone, tmp_path):
    """One identity per set of weights: `--checkpoint DIR`, `robench.evaluate(DIR)` and
    `robench.evaluate(model, tokenizer)` give one run id and one leaderboard row, whatever the folder's name."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    ckpt = save_classifier(tiny_backbone, tmp_path / "saved", {0: "negative", 1: "positive"})
    model = AutoModelForSequenceClassification.from_pretrained(ckpt)
    tokenizer = AutoTokenizer.from_pretrained(ckpt)
    common = dict(task="sst2", attack="advglue", eval_size=8, settings=settings, device="cpu")
    record = robench.evaluate(model, tokenizer, **common)
    sha = record.spec["checkpoint"]["weights_sha256"]
    assert record.spec["model"] == f"checkpoint:saved@{sha[:8]}"
    assert (settings.runs_dir / f"{record.run_id}.json").is_file()
    assert record.run_id.startswith(f"sst2-weights_{sha[:8]}-advglue-s0-")
    saved = robench.evaluate(str(ckpt), **common)
    assert saved.run_id == record.run_id and saved.created == record.created  # the finished record, not a re-run
    shutil.copytree(ckpt, tmp_path / "renamed")  # the same weights in another folder, on the command line
    code, out, err = _cli(capsys, "run", "--checkpoint", tmp_path / "renamed", "--attack", "advglue", "--task", "sst2",
                          "--eval-size", 8, *where)
    assert code == 0, err
    assert _record(settings, out)["run_id"] == record.run_id
    fresh = AutoModelForSequenceClassification.from_pretrained(tiny_backbone, num_labels=2,
                                                               id2label={0: "negative", 1: "positive"})
    fresh.load_state_dict(model.state_dict())  # built in memory from the backbone, then given the same weights
    assert robench.evaluate(fresh, AutoTokenizer.from_pretrained(tiny_backbone), **common).run_id == record.run_id
    assert _cli(capsys, "leaderboard", "--results-dir", settings.results_dir)[0] == 0
    rows = [line for line in (settings.results_dir / "leaderboard.md").read_text().splitlines() if sha[:8] in line]
    assert len(rows) == 1

    with torch.no_grad():
        model.classifier.bias.add_(1.0)
    assert robench.evaluate(model, tokenizer, **common).run_id != record.run_id
    relabelled = robench.evaluate(str(ckpt), label_map="0=positive,1=negative", **common)
    assert relabelled.run_id != record.run_id


def test_evaluate_uses_or_refuses_every_argument_for_a_path(settings, tiny_backbone, tmp_path, monkeypatch):
    """Regression (issue 44): `evaluate(path, ...)` silently ignored `tokenizer`, `name` and `batch_size`."""
    import inspect

    from transformers import AutoTokenizer

    from robench.runs import given

    ckpt = save_classifier(tiny_backbone, tmp_path / "saved", {0: "negative", 1: "positive"})
    common = dict(task="sst2", attack="advglue", eval_size=8, settings=settings, device="cpu")
    with pytest.raises(robench.RobenchError, match="brings its own tokenizer"):
        robench.evaluate(str(ckpt), AutoTokenizer.from_pretrained(ckpt), **common)
    with pytest.raises(robench.RobenchError, match=r"option\(s\) \['epochs'\] do not apply"):
        robench.evaluate(str(ckpt), epochs=3, **common)
    sizes = []
    real = given.load_victim

    def spy(*args, **kwargs):
        sizes.append(kwargs.get("batch_size"))
        return real(*args, **kwargs)

    monkeypatch.setattr("robench.runs.runner.load_victim", spy)
    record = robench.evaluate(str(ckpt), name="mine", batch_size=3, **common)
    assert record.spec["model"].startswith("checkpoint:mine@") and sizes == [3]
    assert "batch_size" in inspect.signature(robench.evaluate).parameters  # help() shows the real signature
    assert "label_map" in robench.evaluate.__doc__ and robench.evaluate.__module__ == "robench.runs.evaluate"


@pytest.mark.integration  # textfooler's real sentence encoder
def test_evaluate_a_plain_function_on_single_sentences_and_pairs(settings):
    seen: list = []

    def keyword_model(inputs):
        seen.extend(inputs)
        negative = [("dull" in x or "not" in x) if isinstance(x, str) else ("not" in x[1]) for x in inputs]
        return np.array([[1.0, -1.0] if n else [-1.0, 1.0] for n in negative])

    record = robench.evaluate(keyword_model, task="sst2", attack="advglue", eval_size=8, name="keywords",
                              settings=settings, device="cpu")
    assert record.spec["model"] == "callable:keywords" and record.spec["checkpoint"]["kind"] == "callable"
    assert "user-declared" in record.spec["checkpoint"]["identity"]
    assert all(isinstance(x, str) for x in seen) and record.metrics["examples"] == 8

    seen.clear()
    pairs = robench.evaluate(keyword_model, task=str(DATA / "pairs.toml"), attack="textfooler", eval_size=4,
                             name="keywords", attack_params=TEXTFOOLER, settings=settings, device="cpu")
    assert pairs.spec["task"] == "pairs" and pairs.metrics["examples"] == 4 and pairs.metrics["errors"] == 0
    assert seen and all(isinstance(x, tuple) and len(x) == 2 for x in seen)

    with pytest.raises(robench.RobenchError, match="name the function"):
        robench.evaluate(keyword_model, task="sst2", attack="advglue", settings=settings)
    with pytest.raises(robench.RobenchError, match=r"logits of shape \(48, 3\) for 48 inputs; expected \(48, 2\)"):
        robench.evaluate(lambda xs: np.zeros((len(xs), 3)), task="sst2", attack="advglue", name="three",
                         settings=settings, device="cpu")


# --- the examples view ----------------------------------------------------------------

def test_word_diff_marks_swaps_insertions_and_deletions():
    from robench.report.examples import word_diff

    before, after = word_diff("a gorgeous, moving film .", "a stunning, moving movie indeed .")
    assert "".join(p.text for p in before) == "a gorgeous, moving film ."
    assert "".join(p.text for p in after) == "a stunning, moving movie indeed ."
    assert [p.text for p in before if p.changed] == ["gorgeous", "film"]
    assert [p.text for p in after if p.changed] == ["stunning", "movie", "indeed"]
    assert word_diff("", "replayed text")[0] == [] and not any(p.changed for p in word_diff("", "x y")[1])


def test_show_filters_by_outcome(capsys, settings, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    import dataclasses

    from robench.core.records import RunRecord
    from robench.core.types import ExampleResult
    from robench.engine.metrics import textattack_metrics
    from robench.runs.spec import RunSpec
    from robench.runs.store import RunStore

    spec = RunSpec(task="sst2", model="demo", attack="textfooler", seed=0)  # a record's id hashes from its spec
    store = RunStore(settings.runs_dir, spec.run_id)
    results = [ExampleResult(0, 1, "a fine film", "a decent film", 1, 0, "successful", 12, 3, 1),
               ExampleResult(1, 0, "a dull film", "a dull film", 1, 1, "skipped", 1, 3, 0),
               ExampleResult(2, 1, "a great film", "a big film", 1, 1, "failed", 30, 3, 1)]
    metrics = {k: v for k, v in dataclasses.asdict(textattack_metrics(results)).items() if k != "extra"}
    store.finish(RunRecord(spec.run_id, spec.to_dict(), {}, {}, metrics, {}, ""), results)
    code, out, err = _cli(capsys, "show", "sst2-demo", "--outcome", "successful", "--results-dir",
                          settings.results_dir)
    assert code == 0, err
    assert "decent" in out and "dull" not in out and "1 of 1 successful examples" in " ".join(out.split())
    assert "positive → negative" in out
    assert "no run 'nope'" in _cli(capsys, "show", "nope", "--results-dir", settings.results_dir)[2]


def test_csv_tsv_jsonl_and_parquet_files_read_the_same_rows(tmp_path):
    import pandas as pd

    from robench.data.file_tasks import file_task_definition, task_from_definition
    from robench.data.loading import load_split, texts_of

    frame = pd.read_csv(DATA / "reviews.csv")
    frame.to_csv(tmp_path / "r.tsv", sep="\t", index=False)
    frame.to_json(tmp_path / "r.jsonl", orient="records", lines=True)
    frame.assign(stars=frame["stars"].map({"neg": 0, "pos": 1})).to_parquet(tmp_path / "r.parquet")  # indices
    rows = []
    for path in (DATA / "reviews.csv", tmp_path / "r.tsv", tmp_path / "r.jsonl", tmp_path / "r.parquet"):
        fmt = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".parquet": "parquet"}[path.suffix]
        definition = file_task_definition(f"{fmt}:{path}", ["review"], "stars", ["neg", "pos"])
        task = task_from_definition(definition)
        ds = load_split(task, "eval", None, "local")
        rows.append((texts_of(ds, task), list(ds["label"])))
    assert len(rows[0][0]) == 40 and rows[0][1][:2] == [1, 0]
    assert all(r == rows[0] for r in rows)


def test_a_hub_id_is_fetched_and_recorded_by_its_id(settings, tiny_backbone, tmp_path, monkeypatch):
    import huggingface_hub

    from robench.runs.given import checkpoint_fields

    snapshot = save_classifier(tiny_backbone, tmp_path / "snapshot", {0: "negative", 1: "positive"})
    asked = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo, **kw: asked.append(repo) or str(snapshot))
    fields = checkpoint_fields("someone/tiny-sst2", cache_dir=settings.cache_dir)
    assert fields["checkpoint"]["location"] == "someone/tiny-sst2" and asked and set(asked) == {"someone/tiny-sst2"}
    assert fields["model"].startswith("checkpoint:tiny-sst2@") and fields["backbone"] == "bert"

    def offline(repo, **kw):
        raise OSError("offline")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(robench.RobenchError, match="not a local directory and could not be fetched"):
        checkpoint_fields("someone/other-model")
