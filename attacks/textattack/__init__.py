"""`textattack:<recipe>`: the real TextAttack 0.3.11 recipes against a robench victim.

This backend is the reference for robench's own recipes (parity and speed, see
`robench bench attack`). Each entry builds `textattack.attack_recipes.<Recipe>`
unchanged on robench's offline resources and attacks the examples one by one
with `Attack.attack`. Every model query goes through a TextAttack ModelWrapper
that calls the robench `Victim` (its prediction cache, query counter and budget).
Registering the entries imports no textattack; it is imported, offline, when a
recipe runs.

* `compat`: importing TextAttack offline (NLTK), and the version check: the
  backend patches TextAttack 0.3.11, and `check` refuses any other version;
* `recipes`: the catalogue (`SPECS`, `TextAttackParams`), robench's substitutes
  for TextAttack's downloads, loaded once, and building the recipe on them;
* `adapters`: the victim, synonym table, sentence encoder and homoglyph swap as
  TextAttack objects, with the fixes for TextAttack's offline failures;
* `results`: TextAttack's AttackResults as robench ExampleResults;
* here: the per-example attack loop, the checks, and registration.
"""
from __future__ import annotations

import functools
import logging
from collections import OrderedDict

from robench.attacks.textattack import results as mapping
from robench.attacks.textattack.compat import SUPPORTED_VERSION, check_version
from robench.attacks.textattack.recipes import (
    SPECS,
    TextAttackParams,
    TextAttackSpec,
    build_attack,
    describe,
    load_resources,
)
from robench.classifier.victim import ModelFailure, QueryBudgetExceeded, QueryCounter
from robench.core.errors import RobenchError
from robench.core.paths import Settings
from robench.core.progress import AttackTally, progress_bar
from robench.core.types import ExampleResult, Task
from robench.data.loading import texts_of
from robench.engine.attack import ATTACKS, AttackContext, AttackOutput, AttackRecipe

log = logging.getLogger(__name__)


def attack(spec: TextAttackSpec, ctx: AttackContext, params: TextAttackParams) -> AttackOutput:
    """Attack every example not in `ctx.done` with the built recipe, one at a time, recording each."""
    res = load_resources(spec, params, ctx.settings, ctx.victim.device)
    todo = [i for i in range(len(ctx.eval_data)) if i not in ctx.done]
    return AttackOutput(_attack_each(spec, ctx, params, res, todo) if todo else [],
                        describe(spec, params, res, ctx.settings))


def _attack_each(spec: TextAttackSpec, ctx: AttackContext, params: TextAttackParams, res, todo: list[int]
                 ) -> list[ExampleResult]:
    built = build_attack(spec, ctx.victim, params, ctx.settings, res)  # imports textattack offline
    from textattack.shared.utils import set_seed

    texts, labels = texts_of(ctx.eval_data, ctx.task), [int(y) for y in ctx.eval_data["label"]]
    results = []
    with progress_bar(ctx.console) as bar:
        tally = AttackTally(f"textattack:{spec.name}", (r.status for r in ctx.done.values()))
        task_id = bar.add_task(tally.description(), total=len(texts), completed=len(texts) - len(todo))
        for i in todo:
            set_seed(ctx.spec.seed * 1_000_003 + i)  # per example: resumed runs draw the same numbers
            counter = built.wrapper.counter = QueryCounter(params.query_budget)
            example = OrderedDict(zip(ctx.task.text_fields, texts[i]))
            try:
                result = mapping.to_example_result(i, labels[i], built.attack.attack(example, labels[i]))
            except QueryBudgetExceeded as exc:  # backstop: TextAttack's own budget stops first
                result = mapping.unattacked_result(i, labels[i], texts[i], "failed", exc, counter.queries)
            except ModelFailure:  # the model itself fails: the run stops (robench.engine.scheduler)
                raise
            except Exception as exc:  # noqa: BLE001 - one bad example must not stop the run
                log.warning("textattack:%s failed on example %d: %s", spec.name, i, exc)
                result = mapping.unattacked_result(i, labels[i], texts[i], "error", exc, counter.queries)
            ctx.record(result)
            results.append(result)
            bar.update(task_id, advance=1, description=tally.add(result.status))
    return results


def check(spec: TextAttackSpec, task: Task, params: TextAttackParams, settings: Settings) -> None:
    """Before training: the supported TextAttack is installed, and the resources the recipe needs are there."""
    from robench.engine import resources

    check_version()
    if "encoder" in spec.needs and params.sentence_encoder not in resources.ENCODERS:
        raise RobenchError(f"unknown sentence_encoder {params.sentence_encoder!r} "
                           f"(known: {', '.join(resources.ENCODERS)})")
    if "embedding" in spec.needs:
        resources.require_synonym_source(settings, params.synonym_source)
    if "mlm" in spec.needs:
        resources.require_masked_lm(settings, params.mlm, "--attack-param mlm")


def uses(spec: TextAttackSpec, params: TextAttackParams) -> dict[str, str]:
    """The robench resources (robench.engine.resources.identity) the recipe reads in place of its downloads."""
    wanted = {"embedding": ("synonyms", params.synonym_source), "mlm": ("masked-lm", params.mlm),
              "encoder": ("sentence-encoder", params.sentence_encoder)}
    return dict(wanted[need] for need in sorted(spec.needs) if need in wanted)


def _entry(spec: TextAttackSpec) -> AttackRecipe:
    return AttackRecipe(
        name=f"textattack:{spec.name}",
        summary=f"TextAttack {SUPPORTED_VERSION} {spec.recipe} ({spec.paper}) on offline resources; reference backend",
        attack=functools.partial(attack, spec), params=TextAttackParams, check=functools.partial(check, spec),
        word_swaps=bool(spec.needs & {"embedding", "mlm", "wordnet"}), resources=functools.partial(uses, spec),
        query_cost_per_word=4.4,  # textattack:textfooler: 80.0 queries / 18.2 words (docs/studies/results.md); a rough
        # figure for the other recipes, whose search costs differ
        load_seconds=4.5,  # textattack:textfooler (docs/studies/presets.md, "The attack's fixed cost")
    )


for _spec in SPECS:
    ATTACKS.register(f"textattack:{_spec.name}")(_entry(_spec))
