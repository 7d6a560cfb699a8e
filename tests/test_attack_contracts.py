"""The contract every attack recipe keeps, checked on every entry of the attack registry.

Parametrised over `ATTACKS.entries()` (built-in and installed plugins), its families (`transfer:RUN_ID`, with a
real source run) and the attacks of the example plugin package (tests/plugins/robench-example-defense, loaded
from its source by its entry points, so the shared environment needs no install). Each entry runs through
`robench.run` on the tiny backbone (one checkpoint, trained once for the module), with fast fake resources put
in at the one seam every recipe loads them through, the loaders of `robench.engine.resources`. The
`textattack:*` entries run TextAttack's own search through robench's adapters on those fakes.

For each entry:

* the attack returns exactly one `ExampleResult` per attacked example, with the right fields: index, label,
  texts and word counts are the data's, the status is a valid one and agrees with the predictions, and the
  predictions are the victim's own on the recorded texts;
* it respects `query_budget`: no example asks more queries than the budget;
* a word-substitution recipe respects `max_modification_rate`: no example changes more than that share of its
  words (rounded up to a whole word, as TextAttack's `MaxWordsPerturbed` and TextDefender count it);
* it records its resources: `AttackOutput.resources` is non-empty, JSON-serialisable, describes every resource
  the recipe loaded, and is what the run record stores.

An entry for which a clause cannot hold says so in `CONTRACTS` (a replay has no query budget, for instance), and
the test checks what holds instead. An entry missing from `CONTRACTS` fails: a new recipe must state which
clauses apply to it.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import math
import tomllib
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
import torch
from conftest import tiny_spec
from test_attacks import FakeEncoder, FakeTagger

import robench
import robench.runs.runner as runner
from robench.core.paths import resolve_settings
from robench.core.records import read_examples
from robench.core.registry import Entry
from robench.core.types import ExampleResult
from robench.data import TASKS
from robench.data.loading import load_split, texts_of
from robench.engine import resources
from robench.engine.attack import ATTACKS, AttackContext, AttackOutput
from robench.engine.resources.mlm import MaskedLM
from robench.engine.resources.nltk_data import Stopwords
from robench.engine.words import FIELD_SEPARATOR, count_words, join_fields, split_words
from robench.training.config import TrainConfig

PLUGIN = Path(__file__).parent / "plugins" / "robench-example-defense"
STATUSES = {"skipped", "failed", "successful", "error"}
EXAMPLES = 8  # eval examples attacked per entry
BUDGET = 20  # victim queries per example (unless an entry's contract says otherwise)
RATE = 0.1  # max_modification_rate: ceil(0.1 * words) words may change


# ----------------------------------------------------------------------------------------- what each entry promises

@dataclass(frozen=True)
class Contract:
    """Which clauses apply to an entry. A clause that does not apply names why, and what holds instead."""

    params: dict[str, Any] = field(default_factory=dict)  # besides query_budget and max_modification_rate
    budget: int = BUDGET  # the query budget given (small enough that it binds on some example)
    no_budget: str = ""  # why there is no query budget ("" = query_budget applies)
    queries: tuple[int, ...] = ()  # with no budget: the queries every example asks, exactly
    no_rate: str = ""  # why max_modification_rate does not apply ("" = a word-substitution recipe: it applies)
    replay: bool = False  # evaluates fixed texts (its own, or another run's) instead of searching
    no_original: bool = False  # its texts come without the originals they were made from (AdvGLUE)


REPLAY = "a replay of fixed adversarial texts: it searches nothing, so it has no query budget"
CONTRACTS: dict[str, Contract] = {
    "advglue": Contract(no_budget=REPLAY + " (one query per example, the replayed text)", queries=(1,),
                        no_rate="a replay: AdvGLUE's texts come without their originals, it changes no word itself",
                        replay=True, no_original=True),
    "transfer:RUN_ID": Contract(no_budget=REPLAY + " (the clean text, then the source's adversarial text when it "
                                "has one)", queries=(1, 2),
                                no_rate="a replay of the source run's texts: the source attack's limit applies",
                                replay=True),
    "textfooler": Contract(),
    # k: a request over the budget is refused whole (robench's engine), so K = 48 candidates never fit in 20 queries
    # valid_synonyms: the tiny random MLM proposes no listed synonym, so the default filter would leave no swap for
    # the rate clauses to check (the filter has its own tests: tests/test_validity.py)
    "bert-attack": Contract(params={"k": 8, "valid_synonyms": False}),
    "gradient-swap": Contract(budget=8),  # its searches here end within 11 queries
    "textattack:textfooler": Contract(),
    # k: TextAttack enumerates all k^t sub-word combinations of a t-piece word (8^6 for some words here): k = 2
    "textattack:bert-attack": Contract(params={"k": 2}),
    # MiniLM has no calibration for these recipes' USE thresholds: the user names the USE-family encoder
    "textattack:bae": Contract(params={"sentence_encoder": "use-m3"}),
    "textattack:textbugger": Contract(params={"sentence_encoder": "use-m3"}),
    "textattack:pwws": Contract(budget=60),  # PWWS scores every WordNet swap of every word before the first swap
    "textattack:iga": Contract(),
    "textattack:deepwordbug": Contract(),
    "textattack:pruthi": Contract(),
    "textattack:input-reduction": Contract(no_rate="deletes words rather than substituting them; it keeps the "
                                                   "prediction, so it is no word-substitution attack"),
    "example-typo": Contract(),  # the example plugin's attack
}


# ----------------------------------------------------------------------------------------- the entries

def _plugin_attacks() -> dict[str, EntryPoint]:
    """The example plugin's `robench.attacks` entry points, read from its pyproject.toml."""
    project = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]
    points = project.get("entry-points", {}).get("robench.attacks", {})
    return {name: EntryPoint(name, value, "robench.attacks") for name, value in points.items()}


def _entries() -> list[str]:
    names = [e.name for e in ATTACKS.entries()] + list(ATTACKS.families())
    return names + [f"plugin:{n}" for n in _plugin_attacks() if n not in names]


def _recipe_name(entry: str, source_run: str) -> str:
    if entry.startswith("plugin:"):
        return entry.removeprefix("plugin:")
    return entry.replace("RUN_ID", source_run) if entry in ATTACKS.families() else entry


def _recipe_params(entry: str, monkeypatch) -> type:
    """The params dataclass of `entry` (a plugin's loaded from its source, as robench would load it)."""
    if entry.startswith("plugin:"):
        monkeypatch.syspath_prepend(str(PLUGIN))
        return _plugin_attacks()[entry.removeprefix("plugin:")].load().params
    return (ATTACKS.families()[entry] if entry in ATTACKS.families() else ATTACKS.get(entry)).params


def _contract(entry: str) -> Contract:
    name = entry.removeprefix("plugin:")
    if name not in CONTRACTS:
        pytest.fail(f"attack {name!r} has no entry in CONTRACTS: state which clauses (query budget, "
                    "max_modification_rate) apply to it, and why a clause that does not apply does not")
    return CONTRACTS[name]


# ----------------------------------------------------------------------------------------- fake resources

def _vocabulary(settings) -> list[str]:
    task = TASKS.get("sst2")
    texts = texts_of(load_split(task, "eval", settings.data_dir, "local"), task)
    return sorted({w.lower() for text in texts for f in text for w in split_words(f) if w.isalpha()})


def fake_synonym_table(words: list[str]) -> resources.SynonymTable:
    """A real SynonymTable over the eval split's words: groups of 6 words with close vectors (cos > 0.9)."""
    rng = np.random.default_rng(0)
    groups = rng.permutation(len(words)) % max(1, len(words) // 6)
    centres = rng.normal(size=(groups.max() + 1, 16))
    vectors = centres[groups] + 0.1 * rng.normal(size=(len(words), 16))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    k = 8
    nn, nn_cos = np.full((len(words), k), -1, np.int32), np.zeros((len(words), k), np.float32)
    for i in range(len(words)):
        mates = [j for j in np.flatnonzero(groups == groups[i]) if j != i]
        mates.sort(key=lambda j: -float(vectors[i] @ vectors[j]))
        mates = mates[:k]
        nn[i, :len(mates)] = mates
        nn_cos[i, :len(mates)] = [float(vectors[i] @ vectors[j]) for j in mates]
    return resources.SynonymTable(words, vectors, nn, nn_cos, {"name": "fake-synonyms", "size": len(words)})


class FakeResources:
    """Every loader of `robench.engine.resources` a recipe calls, answered by fast fakes (the real classes on small
    data where robench has them); records what the recipe's attack loaded, so its description can be checked."""

    def __init__(self, settings, backbone: Path) -> None:
        self.loaded: dict[str, str] = {}  # loader -> the `info["name"]` of what it returned, during the attack
        self.attacking = False  # set while the recipe's `attack` runs (the runner's own loads are not the recipe's)
        self.synonyms = fake_synonym_table(_vocabulary(settings))
        self.backbone = backbone

    def install(self, monkeypatch) -> None:
        for name in ("stopwords", "pos_tagger", "synonym_table", "sentence_encoder", "masked_lm"):
            monkeypatch.setattr(resources, name, getattr(self, name))
        for name in ("require_synonym_source", "require_masked_lm", "require_built_mlm"):
            monkeypatch.setattr(resources, name, lambda *args, **kwargs: None)
        # the lexicon (the tiny cut's, `world`): watched only
        if importlib.util.find_spec("robench.engine.resources.lexicon") is not None:
            module = importlib.import_module("robench.engine.resources.lexicon")
            load = module.lexicon
            monkeypatch.setattr(module, "lexicon", lambda *args, **kwargs: self._got("lexicon", load(*args, **kwargs)))

    def _got(self, loader: str, obj: Any) -> Any:
        if self.attacking:
            self.loaded[loader] = obj.info["name"]
        return obj

    def stopwords(self, settings):
        words = ("a", "an", "the", "and", "of", "it", "is", "to", "in", "that", "this", "s", "with", "for")
        return self._got("stopwords", Stopwords(words, {"name": "fake-stopwords"}))

    def pos_tagger(self, settings):
        return self._got("pos_tagger", FakeTagger())

    def synonym_table(self, settings, source: str = "", console=None):
        return self._got("synonym_table", self.synonyms)

    def sentence_encoder(self, settings, device=None, name: str = "minilm"):
        # the real class (so threshold_for maps the paper's thresholds as for the named encoder) on a fake encoding
        encoder = resources.SentenceEncoder(name, FakeEncoder().embed, {"name": f"fake-encoder-as-{name}"})
        return self._got("sentence_encoder", encoder)

    def masked_lm(self, settings, device=None, name: str = "", backbone: str = ""):
        from transformers import AutoTokenizer, BertForMaskedLM

        torch.manual_seed(0)
        model = BertForMaskedLM.from_pretrained(self.backbone).eval()
        mlm = MaskedLM(model, AutoTokenizer.from_pretrained(self.backbone),
                       {"name": "fake-masked-lm", "heldout_masked_accuracy": 0.0})
        return self._got("masked_lm", mlm)


# ----------------------------------------------------------------------------------------- fixtures

# trained long enough (it fits the 96 tiny training rows) that its predictions follow the words, so attacks flip some
TRAIN = TrainConfig(epochs=10, batch_size=16, max_length=32, lr=3e-3)


def _spec(backbone: Path, attack: str, params: dict[str, Any]):
    return tiny_spec(backbone, attack=attack, eval_size=EXAMPLES, attack_params=params, train=TRAIN)


@dataclass
class World:
    settings: Any  # one results dir for every entry: each run has its own run id
    source: Any  # the finished textfooler run that transfer:RUN_ID replays


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_data, tiny_backbone, lexicon_cut) -> Iterator[World]:
    """The tiny checkpoint (trained once, cached for every entry) and a textfooler run to transfer from; for the
    module, the swap audit's lexicon is the tiny cut's (not the real relations, built from WordNet)."""
    root = tmp_path_factory.mktemp("contracts")
    settings = resolve_settings(tiny_data, root / "cache", root / "results")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ROBENCH_LEXICON_CUT", str(lexicon_cut))
        with pytest.MonkeyPatch.context() as mp:
            FakeResources(settings, tiny_backbone).install(mp)
            source = robench.run(_spec(tiny_backbone, "textfooler", {"k": 8}), settings, device="cpu")
        assert any(r.status == "successful" for r in read_examples(settings.runs_dir, source.run_id)), \
            "the source run has no successful attack: transfer would replay nothing"
        yield World(settings, source)


@dataclass
class Attacked:
    ctx: AttackContext
    output: AttackOutput
    record: Any
    fakes: FakeResources


def _attack(entry: str, params: dict[str, Any], world: World, tiny_backbone: Path, monkeypatch) -> Attacked:
    """`robench.run` of `entry` with fake resources, capturing the context and the AttackOutput of its attack."""
    settings = world.settings
    if entry.startswith("plugin:"):  # found by the registry as an installed plugin's entry point would be
        monkeypatch.syspath_prepend(str(PLUGIN))
        name = entry.removeprefix("plugin:")
        monkeypatch.setitem(ATTACKS._entries, name, Entry(name, "plugin robench-example-defense",
                                                          entry_point=_plugin_attacks()[name]))
    fakes = FakeResources(settings, tiny_backbone)
    fakes.install(monkeypatch)
    captured: list[tuple[AttackContext, AttackOutput]] = []
    stage = runner.attack

    def attack_stage(resolved, model, store, device, console=None, force=False):
        recipe = resolved.recipe

        def spy(ctx, p):
            fakes.attacking = True
            try:
                output = recipe.attack(ctx, p)
            finally:
                fakes.attacking = False
            captured.append((ctx, output))
            return output

        spied = dataclasses.replace(resolved, recipe=dataclasses.replace(recipe, attack=spy))
        return stage(spied, model, store, device, console, force)

    monkeypatch.setattr(runner, "attack", attack_stage)
    record = robench.run(_spec(tiny_backbone, _recipe_name(entry, world.source.run_id), params), settings,
                         device="cpu")
    assert record.timings["train_cached"] is True  # every entry attacks the module's one checkpoint
    (ctx, output), = captured
    return Attacked(ctx, output, record, fakes)


# ----------------------------------------------------------------------------------------- the contract

def _fields(text: str, like: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(text.split(FIELD_SEPARATOR, len(like) - 1))


def _words_changed(result: ExampleResult) -> int | None:
    """Word positions that differ between the original and perturbed text; None when the word count changed."""
    before, after = split_words(result.original_text), split_words(result.perturbed_text)
    return sum(a != b for a, b in zip(before, after)) if len(before) == len(after) else None


def check_results(entry: str, contract: Contract, ctx: AttackContext, results: list[ExampleResult]) -> None:
    texts, labels = texts_of(ctx.eval_data, ctx.task), [int(y) for y in ctx.eval_data["label"]]
    assert all(isinstance(r, ExampleResult) for r in results)
    assert sorted(r.index for r in results) == list(range(len(texts))), \
        f"{entry}: not exactly one result per attacked example"
    victim = ctx.victim
    for r in results:
        text, where = texts[r.index], f"{entry}, example {r.index}"
        assert r.status in STATUSES, where
        assert r.label == labels[r.index] and r.num_words == count_words(text), where
        assert all(type(getattr(r, f.name)) is (int if f.type == "int" else str)
                   for f in dataclasses.fields(ExampleResult)), where
        assert r.queries >= 1 and 0 <= r.words_perturbed <= r.num_words, where
        if contract.no_original:  # AdvGLUE's texts are adversarial already
            assert r.original_text == "" and r.perturbed_text == join_fields(text), where
        else:
            assert r.original_text == join_fields(text), where
        if r.status == "error":
            assert r.error and r.perturbed_prediction == -1 and r.words_perturbed == 0, where
            continue
        if r.original_prediction != -1:  # -1: none made (a replay, or the budget stopped the clean prediction)
            assert r.original_prediction == int(victim.predict([text])[0]), where
        if r.status == "skipped":
            assert r.original_prediction != r.label and r.perturbed_text == r.original_text, where
            assert r.words_perturbed == 0, where
            continue
        if r.original_prediction != -1:
            assert r.original_prediction == r.label, f"{where}: attacked although misclassified"
        if r.perturbed_prediction == -1:  # the budget ran out before any prediction
            assert r.status == "failed" and r.perturbed_text == r.original_text, where
            continue
        assert r.perturbed_prediction == int(victim.predict([_fields(r.perturbed_text, text)])[0]), \
            f"{where}: the recorded prediction is not the victim's on the recorded text"
        assert (r.status == "successful") == (r.perturbed_prediction != r.label), where
        if not contract.replay and (changed := _words_changed(r)) is not None:
            assert r.words_perturbed == changed, where
    attacked = [r for r in results if r.status in ("failed", "successful")]
    assert attacked, f"{entry}: no example was attacked, so the contract says nothing about it"
    if not contract.no_original:  # a search, or the replay of one: some words were changed
        assert any(r.words_perturbed > 0 for r in attacked), f"{entry} changed no word of any example"


def check_budget(entry: str, contract: Contract, params_cls: type, results: list[ExampleResult]) -> None:
    has_budget = "query_budget" in {f.name for f in dataclasses.fields(params_cls)}
    if contract.no_budget:
        assert not has_budget, f"{entry} now takes query_budget: drop its no_budget reason from CONTRACTS"
        assert {r.queries for r in results} <= set(contract.queries), \
            f"{entry} ({contract.no_budget}): queries {sorted({r.queries for r in results})}"
        return
    assert has_budget, f"{entry} takes no query_budget parameter"
    worst = max(results, key=lambda r: r.queries)
    assert worst.queries <= contract.budget, \
        f"{entry}: example {worst.index} asked {worst.queries} > {contract.budget} queries"
    # the budget was reached (TextAttack stops at it) or refused a request (robench's engine): it was put to the test
    assert any(r.queries == contract.budget or "budget" in r.error for r in results), \
        f"{entry}: no example came near the budget of {contract.budget}: lower it so the test means something"


def check_rate(entry: str, contract: Contract, results: list[ExampleResult]) -> None:
    if contract.no_rate:
        return
    for r in results:
        allowed = math.ceil(RATE * r.num_words)
        changed = _words_changed(r)
        assert r.words_perturbed <= allowed and (changed is None or changed <= allowed), \
            f"{entry}, example {r.index}: {r.words_perturbed} of {r.num_words} words changed, more than " \
            f"max_modification_rate={RATE} allows ({allowed})"


def check_resources(entry: str, attacked: Attacked) -> None:
    described = attacked.output.resources
    assert isinstance(described, dict) and described, f"{entry} records no resources"
    text = json.dumps(described)  # raises on anything that is not JSON
    assert json.loads(text) == attacked.record.resources["attack"], f"{entry}: the record stores other resources"
    for loader, name in attacked.fakes.loaded.items():
        assert name in text, f"{entry} loaded {name} ({loader}) but does not describe it"


def _has_rate(params_cls: type) -> bool:
    return "max_modification_rate" in {f.name for f in dataclasses.fields(params_cls)}


@pytest.mark.parametrize("entry", [pytest.param(e, marks=pytest.mark.textattack) if e.startswith("textattack:")
                                   else e for e in _entries()])
def test_attack_keeps_the_contract(entry, world, tiny_backbone, monkeypatch):
    contract = _contract(entry)
    params_cls = _recipe_params(entry, monkeypatch)
    params = dict(contract.params)
    if not contract.no_budget:
        params["query_budget"] = contract.budget
    if not contract.no_rate and _has_rate(params_cls):  # without the parameter the test below fails for it
        params["max_modification_rate"] = RATE
    attacked = _attack(entry, params, world, tiny_backbone, monkeypatch)
    results = attacked.output.results
    check_results(entry, contract, attacked.ctx, results)
    assert [dataclasses.asdict(r) for r in read_examples(attacked.ctx.settings.runs_dir, attacked.record.run_id)] \
        == [dataclasses.asdict(r) for r in sorted(results, key=lambda r: r.index)]  # what the run stored
    check_budget(entry, contract, params_cls, results)
    if _has_rate(params_cls):
        check_rate(entry, contract, results)
    check_resources(entry, attacked)


@pytest.mark.parametrize("entry", [e for e in _entries() if not CONTRACTS.get(e.removeprefix("plugin:"),
                                                                               Contract()).no_rate])
def test_word_substitution_recipe_takes_max_modification_rate(entry, monkeypatch):
    """The field's budget on changed words (issue 25): every word-substitution recipe takes the parameter."""
    params_cls = _recipe_params(entry, monkeypatch)
    assert _has_rate(params_cls), \
        f"{entry}: its params {params_cls.__name__} have no max_modification_rate parameter (the share of words " \
        f"an attack may change); known: {', '.join(f.name for f in dataclasses.fields(params_cls))}"
    default = next(f for f in dataclasses.fields(params_cls) if f.name == "max_modification_rate")
    assert default.default is None or 0 < default.default <= 1


def test_every_registered_attack_is_in_the_contract_table():
    """CONTRACTS names no entry that does not exist (a renamed recipe must be renamed here too)."""
    names = {e.removeprefix("plugin:") for e in _entries()}
    assert set(CONTRACTS) <= names, sorted(set(CONTRACTS) - names)
