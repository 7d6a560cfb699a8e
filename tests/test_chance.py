"""A checkpoint that did not train is flagged and left out of comparisons (robench.runs.chance)."""
from __future__ import annotations

import numpy as np
import pytest
from test_compare import fake_run, statuses

import robench
from robench.cli import main
from robench.cli.runs import summary_table
from robench.core.records import iter_records
from robench.report.compare import compare, group_settings
from robench.report.leaderboard import write_leaderboard
from robench.report.leaderboard_page import write_html
from robench.report.stats import INSUFFICIENT
from robench.runs.chance import MARGIN, MIN_CHECK_EXAMPLES, TOO_FEW_TO_CHECK, check, unchecked, untrained

QNLI_DEV = [0] * 522 + [1] * 571  # the reference QNLI dev split's labels (majority 52.2%)
SST2_DEV = [0] * 428 + [1] * 444  # SST-2's 872 dev sentences (majority 50.9%)


@pytest.mark.parametrize("accuracy, trained", [(0.5389, False), (0.5819, False), (0.8042, True), (0.8170, True)])
def test_the_reference_qnli_checkpoints_under_the_rule(accuracy, trained):
    """imbert's QNLI seeds 4 and 2 (dev 53.9%, 58.2%) did not train; its other seeds and bert's did."""
    assert check("dev", accuracy, QNLI_DEV).trained is trained


def test_the_rule_is_the_wilson_lower_bound_a_margin_above_the_majority_rate():
    labels = [0] * 47 + [1] * 53  # majority 53%, 100 examples: the low-resource protocol's smallest clean check
    assert check("clean", 0.70, labels).trained  # lower bound 60.4% > 58%
    assert not check("clean", 0.66, labels).trained  # lower bound 56.3% < 58%
    flagged = check("dev", 0.53, labels)
    assert not flagged.trained and f"not {100 * MARGIN:.0f} points above the majority-class rate 53.0%" in \
        flagged.warning()
    assert check("dev", 0.9, []) is None


def _half_trained(runs_dir):
    """bert and imbert at 5 seeds on the same 200 examples; imbert's seeds 2 and 4 answer one label throughout
    (clean accuracy 50%, the majority rate) and so survive the attack on half the examples."""
    rng = np.random.default_rng(0)
    for seed in range(5):
        fake_run(runs_dir, statuses(100, 100, rng=rng), model="bert", seed=seed)
        if seed in (2, 4):
            constant = ["failed" if i % 2 else "skipped" for i in range(200)]
            fake_run(runs_dir, constant, model="imbert", seed=seed)
        else:
            fake_run(runs_dir, statuses(100, 100, rng=rng), model="imbert", seed=seed)


def test_comparisons_leave_out_the_seeds_that_did_not_train(tmp_path, capsys):
    runs = tmp_path / "runs"
    _half_trained(runs)
    (found,) = compare(group_settings(iter_records(runs)), runs, "bert")
    assert found.seeds == (0, 1, 3) and found.excluded == (2, 4) and found.verdict == INSUFFICIENT

    assert main(["compare", "--baseline", "bert", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "0 1 3 (2 4 untrained)" in " ".join(out.split())
    assert sum(line.startswith("warning: sst2-imbert") for line in out.splitlines()) == 2

    table, _, md = write_leaderboard(tmp_path, baseline="bert")
    flagged = dict(zip(table["model"], table["untrained_seeds"]))
    assert flagged == {"imbert": "2 4", "bert": ""}
    assert "untrained seeds: their checkpoint did not train" in md.read_text()
    rows = [line for line in (tmp_path / "settings.md").read_text().splitlines() if line.startswith("| sst2 |")]
    assert [" 2 4 " in r for r in rows] == [r.startswith("| sst2 | imbert") for r in rows] and len(rows) == 2
    page = write_html(tmp_path, tmp_path / "board.html", baseline="bert", table=table).read_text()
    assert "⚠ seeds 2, 4 did not train" in page


def test_a_board_where_every_checkpoint_trained_has_no_untrained_column(tmp_path):
    rng = np.random.default_rng(1)
    for seed in range(2):
        fake_run(tmp_path / "runs", statuses(100, 100, rng=rng), model="bert", seed=seed)
    table, _, md = write_leaderboard(tmp_path)
    assert "untrained_seeds" not in table.columns and "untrained" not in md.read_text()


def test_a_run_records_its_checks_and_its_summary_warns(settings):

    def constant(inputs):
        return np.array([[0.0, 1.0]] * len(inputs))

    record = robench.evaluate(constant, task="sst2", attack="advglue", eval_size=8, name="constant",
                              settings=settings, device="cpu")
    (dev,) = record.metrics["chance"]  # AdvGLUE has no clean accuracy: the dev check only
    assert dev["what"] == "dev" and dev["trained"] is False and dev["accuracy"] == record.metrics["dev_accuracy"]
    assert dev["examples"] < MIN_CHECK_EXAMPLES  # the test data's dev split: too small to tell
    assert f"note: {TOO_FEW_TO_CHECK}" in str(summary_table(record).caption)
    record.metrics["chance"] = [check("dev", 0.51, SST2_DEV).to_dict()]  # at chance on SST-2's whole dev split
    assert "WARNING: the checkpoint did not train: dev accuracy" in str(summary_table(record).caption)


def test_a_check_on_too_few_examples_cannot_tell():
    """20 attacked examples cannot tell (a checkpoint at 84% fails the rule there in about 21% of draws): the check
    is not applied, and with no other check the record says so instead of being flagged."""
    few = check("clean", 0.6, [0, 1] * 10)
    assert not few.trained and not few.can_tell and untrained([few]) == []
    assert unchecked([few]) == (f"{TOO_FEW_TO_CHECK} (20 attacked; a check needs {MIN_CHECK_EXAMPLES}): kept in "
                                "comparisons")
    dev = check("dev", 0.84, SST2_DEV)
    assert dev.can_tell and unchecked([dev, few]) is None and untrained([dev, few]) == []
    at_chance = check("dev", 0.51, SST2_DEV)
    assert untrained([at_chance, few]) == [at_chance]
    assert check("clean", 0.5, [0, 1] * (MIN_CHECK_EXAMPLES // 2)).can_tell and unchecked([]) is None


def _small_evaluations(runs_dir, examples: int, dev: bool) -> None:
    """bert and imbert x 5 seeds attacked on `examples` examples, each right on 60% of them (every such clean check
    failed the rule before it needed MIN_CHECK_EXAMPLES); with `dev`, each checkpoint's own dev check (84% of
    SST-2's 872 dev sentences) is recorded."""
    right = round(0.6 * examples)
    labels = [i % 2 for i in range(examples)]
    for seed in range(5):
        for model, kept in (("bert", right - 1), ("imbert", right)):
            checks = [check("clean", right / examples, labels)] + ([check("dev", 0.84, SST2_DEV)] if dev else [])
            fake_run(runs_dir, statuses(kept, right - kept, examples - right), model=model, seed=seed,
                     eval_size=examples, chance=[c.to_dict() for c in checks])


@pytest.mark.parametrize("examples", [5, 20])
def test_small_evaluations_read_the_checkpoints_own_dev_check(tmp_path, examples):
    runs = tmp_path / "runs"
    _small_evaluations(runs, examples, dev=True)
    (found,) = compare(group_settings(iter_records(runs)), runs, "bert")
    assert found.seeds == (0, 1, 2, 3, 4) and found.excluded == () and found.verdict != INSUFFICIENT


def test_small_evaluations_without_a_dev_check_are_kept_and_say_so(tmp_path, capsys):
    runs = tmp_path / "runs"
    _small_evaluations(runs, 5, dev=False)
    (found,) = compare(group_settings(iter_records(runs)), runs, "bert")
    assert found.seeds == (0, 1, 2, 3, 4) and found.excluded == ()
    assert main(["compare", "--baseline", "bert", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert sum(TOO_FEW_TO_CHECK in line for line in out.splitlines()) == 10 and "untrained" not in out
    (record,) = [r for r in iter_records(runs) if r.spec["model"] == "imbert" and r.spec["seed"] == 0]
    assert f"note: {TOO_FEW_TO_CHECK}" in str(summary_table(record).caption)
