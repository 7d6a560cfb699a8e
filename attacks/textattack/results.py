"""TextAttack's AttackResults as robench ExampleResults (one row of the per-example CSV)."""
from __future__ import annotations

from robench.classifier.victim import Text
from robench.core.types import ExampleResult, Status
from robench.engine.words import count_words, join_fields


def to_example_result(index: int, label: int, result) -> ExampleResult:
    """Map a TextAttack AttackResult onto robench's ExampleResult.

    Skipped/Failed/Successful map by name. A MaximizedAttackResult (goal functions
    with no success criterion, e.g. input reduction) counts as successful when the
    final prediction differs from the gold label, else as failed.
    """
    from textattack.attack_results import (
        FailedAttackResult,
        MaximizedAttackResult,
        SkippedAttackResult,
        SuccessfulAttackResult,
    )

    original, perturbed = result.original_result, result.perturbed_result
    if isinstance(result, SkippedAttackResult):
        status = "skipped"
    elif isinstance(result, SuccessfulAttackResult):
        status = "successful"
    elif isinstance(result, FailedAttackResult):
        status = "failed"
    elif isinstance(result, MaximizedAttackResult):
        status = "successful" if int(perturbed.output) != label else "failed"
    else:
        raise TypeError(f"unknown TextAttack result type {type(result).__name__}")
    before, after = original.attacked_text, perturbed.attacked_text
    return ExampleResult(
        index=index, label=label, original_text=join_fields(before._text_input.values()),
        perturbed_text=join_fields(after._text_input.values()), original_prediction=int(original.output),
        perturbed_prediction=int(perturbed.output), status=status, queries=int(result.num_queries),
        num_words=len(before.words), words_perturbed=0 if status == "skipped" else len(before.all_words_diff(after)),
    )


def unattacked_result(index: int, label: int, text: Text, status: Status, exc: BaseException,
                      queries: int) -> ExampleResult:
    """An example TextAttack gave no result for: `exc` says why (an exhausted budget, an error)."""
    joined = join_fields(text)
    return ExampleResult(index=index, label=label, original_text=joined, perturbed_text=joined,
                         original_prediction=-1, perturbed_prediction=-1, status=status, queries=queries,
                         num_words=count_words(text), error=f"{type(exc).__name__}: {exc}")
