"""`advglue`: replay the AdvGLUE dev set against the fine-tuned model.

Wang et al., "Adversarial GLUE: A Multi-Task Benchmark for Robustness
Evaluation of Language Models", NeurIPS 2021 (Datasets and Benchmarks).
AdvGLUE's examples are fixed, human-validated adversarial texts made against
BERT-family models, so this "attack" is a static evaluation: accuracy on the
AdvGLUE dev split of the task (`robust_accuracy`, accuracy under attack), the
accuracy on the task's whole dev split (`dev_accuracy`, as in every record),
and the difference between the two (`dev_minus_robust`: two sets of examples,
so not an accuracy drop). There is no `clean_accuracy` (the attacked examples'
accuracy before the attack), and so no `accuracy_drop`: AdvGLUE examples come
without their originals.

Deviations: the official leaderboard scores the hidden AdvGLUE test set; the
dev set (the only public split) is used here. No perturbation-specific metrics
(success rate, perturbed words, queries) apply: AdvGLUE examples do not come
paired with their originals.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from robench.core.errors import RobenchError
from robench.core.paths import Settings
from robench.core.types import ExampleResult, Source, Task
from robench.data.loading import ADVGLUE_FILE, load_advglue, texts_of
from robench.engine.attack import ATTACKS, AttackContext, AttackOutput, AttackRecipe
from robench.engine.metrics import textattack_metrics
from robench.engine.words import count_words, join_fields


@dataclass(frozen=True)
class AdvGlueParams:
    pass


def _check(task: Task, params: AdvGlueParams, settings: Settings) -> None:
    if task.advglue is None and task.adversarial is None:
        load_advglue(task, None, "local")  # raises the "no AdvGLUE split" error


def _attack(ctx: AttackContext, params: AdvGlueParams) -> AttackOutput:
    adv = ctx.eval_data
    texts, labels = texts_of(adv, ctx.task), list(adv["label"])
    todo = [i for i in range(len(adv)) if i not in ctx.done]
    preds = ctx.victim.predict([texts[i] for i in todo])
    results = []
    for i, pred in zip(todo, preds):
        result = ExampleResult(
            index=i, label=int(labels[i]), original_text="", perturbed_text=join_fields(texts[i]),
            original_prediction=-1, perturbed_prediction=int(pred),
            status="failed" if pred == labels[i] else "successful", queries=1, num_words=count_words(texts[i]),
        )
        ctx.record(result)
        results.append(result)
    source = f"the task's replay file ({ctx.task.name})" if ctx.task.adversarial is not None else \
        "AdvGLUE dev (AI-secure/adversarial-glue dev.json)"
    return AttackOutput(results, {"advglue": source})


def _summarize(results: list[ExampleResult], ctx: AttackContext, params: AdvGlueParams) -> dict[str, Any]:
    base = textattack_metrics(results)
    if base.examples == 0:
        raise RobenchError("AdvGLUE replay evaluated no examples")
    adv_accuracy = base.failed / base.examples
    return {
        "examples": base.examples, "clean_accuracy": None, "robust_accuracy": adv_accuracy,
        "accuracy_drop": None, "dev_minus_robust": ctx.dev_accuracy - adv_accuracy, "attack_success_rate": None,
        "skipped": None, "failed": base.failed, "successful": base.successful, "errors": base.errors,
        "avg_perturbed_word_pct": None, "avg_words_per_input": base.avg_words_per_input, "avg_queries": None,
    }


def _examples(task: Task, settings: Settings, source: Source):
    return load_advglue(task, settings.data_dir, source)


ATTACKS.register("advglue")(AttackRecipe(
    name="advglue", summary="Replay the AdvGLUE dev set (Wang et al., 2021); static adversarial evaluation",
    attack=_attack, params=AdvGlueParams, check=_check, summarize=_summarize, examples=_examples,
    data_files=(ADVGLUE_FILE,), replay=True,
))
