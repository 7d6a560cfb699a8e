"""studies/gpu_lend.py (issue 48): its plan from the committed H200 timings, the refusal over the limit, sizing from
a lend's own measurements, and the whole script at a tiny size on the CPU, run twice (the second run resumes)."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from study_scripts import load_study

from robench.core.packed import pack_results_dir

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "studies" / "gpu_lend.py"


def _module(name: str = "gpu_lend"):
    return load_study(name)


def _modules():
    """The script's plan, steps and stand-ins (studies/gpu_lend_*.py)."""
    return tuple(_module(f"gpu_lend_{part}") for part in ("plan", "steps", "standins"))


def _plan(capsys, shared_data, out: Path, *flags: str) -> tuple[int, dict[str, float], str]:
    code = _module().main(["--plan", "--out", str(out), "--data-dir", str(shared_data), *flags])
    captured = capsys.readouterr()
    rows = {}
    for line in captured.out.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[1].isdigit():
            rows[cells[0]] = float(cells[1])
    return code, rows, captured.out + captured.err


def test_the_plan_fits_ten_minutes_from_the_committed_timings(tmp_path, shared_data, capsys):
    code, rows, text = _plan(capsys, shared_data, tmp_path)
    assert code == 0, text
    steps = {k: v for k, v in rows.items() if k != "total"}
    assert list(steps) == ["install", "attack", "textattack", "probe", "claims", "extra", "summary"]
    assert abs(sum(steps.values()) - rows["total"]) <= len(steps)  # each row rounded to a second
    assert 0 < rows["total"] <= 600 and all(steps[s] > 0 for s in ("attack", "textattack", "probe", "claims"))
    assert steps["extra"] == 0 and "| extra | 0 | not served by the pack: not run |" in text
    assert "limit 600 s: fits" in text and "claims' training size: 2500 SST-2 sentences" in text
    assert "textattack:textfooler on 100 dev texts" in text
    assert "H200 records" in text and "H200 MLM build" in text  # what the figures come from
    assert "TextFooler on 872 dev texts" in text  # the whole SST-2 dev split


def test_the_plan_counts_the_steps_it_is_given(tmp_path, shared_data, capsys):
    """The pack's steps by default; only the steps given are counted."""
    _, default, _ = _plan(capsys, shared_data, tmp_path)
    code, rows, text = _plan(capsys, shared_data, tmp_path, "--steps", "claims,textattack,attack")
    assert rows["textattack"] > 0 and rows["probe"] == 0 and rows["attack"] == default["attack"]
    assert [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")][2:5] == [
        "attack", "textattack", "probe"]  # the plan's order is the steps' order


def test_a_plan_over_the_limit_is_refused(tmp_path, shared_data, capsys):
    code, rows, text = _plan(capsys, shared_data, tmp_path, "--limit", "300")
    assert code == 1 and rows["total"] > 300
    assert "OVER THE LIMIT" in text and "gpu_lend: error: the plan needs" in text


def test_a_lends_measurements_size_the_next_plan(tmp_path, shared_data, capsys):
    """A measured speed-up and calibration replace the committed figures: the claims grow to fill the time."""
    (tmp_path / "saturation.json").write_text(json.dumps({"rounds": [
        {"jobs": 1, "examples_per_second": 100.0}, {"jobs": 2, "examples_per_second": 190.0},
        {"jobs": 4, "examples_per_second": 300.0}, {"jobs": 8, "examples_per_second": 310.0}]}))
    (tmp_path / "calibration.json").write_text(json.dumps({"device": "cuda", "forward_rate": 40000.0,
                                                          "process_start": 4.0, "warm_up": 12.0}))
    plan, steps, standins = _modules()
    costs = plan.load_costs(tmp_path)
    assert costs.forward_rate == 40000.0 and costs.speedup[4] == 3.0 and costs.basis["warm_up"] == "measured on cuda"
    assert plan.jobs_and_speedup(costs, None) == (4, 3.0)  # the fewest jobs within 90% of the best
    code, rows, text = _plan(capsys, shared_data, tmp_path)
    assert code == 0 and rows["total"] <= 600
    size = int(text.split("claims' training size: ")[1].split()[0])
    assert size > 3000 and "4 jobs, speed-up 3.00x (probe (saturation.json))" in text
    (tmp_path / "state.json").write_text(json.dumps({"protocol": "h200", "attack": "done", "saturation": "x",
                                                     "jobs": 4, "train_size": 6000}))
    code, rows, text = _plan(capsys, shared_data, tmp_path)  # a second lend: what is done costs nothing
    assert rows["attack"] == 0 and rows["probe"] == 0 and "at 6000 sentences (0 done)" in text


def test_the_claims_are_sized_by_their_schedule_not_their_total_work():
    """The 2026-12-04 lend sized 10 jobs on 8 slots by total work over the speed-up; the ninth, started when a fast
    job ended, outran the limit. The plan now plays the schedule: a job waiting for a slot ends later."""
    plan, steps, standins = _modules()
    curve = {1: 1.0, 2: 1.69, 4: 3.23, 8: 4.49}  # that lend's probe
    assert plan.shared_speedup(curve, 6) == pytest.approx(3.23 + (4.49 - 3.23) / 2)
    assert plan.shared_speedup(curve, 10) == 4.49 and plan.shared_speedup({1: 1.0}, 5) == 1.0
    assert plan.makespan([10.0, 10.0], 1, {1: 1.0}) == 20.0
    assert plan.makespan([10.0, 10.0], 2, {2: 2.0}) == pytest.approx(10.0)
    assert plan.makespan([10.0, 10.0], 2, {1: 1.0}) == pytest.approx(20.0)  # unmeasured: sharing gains nothing
    # nine equal jobs on eight perfectly scaling slots: total work over the speed-up says 112.5 s, the schedule 200 s
    assert plan.makespan([100.0] * 9, 8, {8: 8.0}) == pytest.approx(200.0)
    # the lend's mix at its size: 5 IM-BERT (slowest first per seed) and 5 BERT jobs on 8 slots
    alone = [280.0, 100.0] * 5
    assert plan.makespan(alone, 8, curve) > sum(alone) / 4.49 + 100


def _lend(tmp_path: Path, tiny_data: Path, tiny_backbone: Path, cut: Path, *flags: str) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "OMP_NUM_THREADS": "1", "ROBENCH_LEXICON_CUT": str(cut)}
    done = subprocess.run([sys.executable, str(SCRIPT), "--protocol", "tiny", "--backbone", str(tiny_backbone),
                           "--data-dir", str(tiny_data), "--device", "cpu", "--out", str(tmp_path / "out"),
                           "--cache-dir", str(tmp_path / "cache"), "--bundle", str(tmp_path / "bundle"),
                           "--limit", "1800", *flags],  # not the H200's 600 s: a shared CPU may be slow
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=2400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.integration  # the whole script end to end, twice, in subprocesses (training, attacks, claims, probe)
def test_the_script_runs_end_to_end_at_a_tiny_size_and_resumes(tmp_path, tiny_data, tiny_backbone, lexicon_cut):
    out = tmp_path / "out"
    first = _lend(tmp_path, tiny_data, tiny_backbone, lexicon_cut)  # the steps the pack serves
    assert "claims: 0 finished before, 2 ran, 0 failed" in first
    for heading in ("## 1. Attack bench", "## 2. Concurrent training jobs", "## 3. Claims"):
        assert heading in first and heading in (out / "summary.md").read_text()
    assert "| fraction of the raw rate (target: 85%) |" in first and "claim verdict" in first
    state = json.loads((out / "state.json").read_text())
    assert state["attack"] == state["textattack"] == "done" and state["train_size"] == 64
    parity = next(line for line in (out / "summary.md").read_text().splitlines()
                  if line.startswith("| examples (errors) |"))
    assert parity.split("|")[2:5] == [" 4 (0) ", " 2 (0) ", " 2 (0) "]  # whole split; both attacks on the subset
    textattack = json.loads(next((out / "runs").glob("*-bert-textattack*textfooler-*.json")).read_text())
    assert textattack["resources"]["attack"]["synonyms"]["used"]["cut"]["texts"] == "tiny sst2 dev"
    assert state["jobs"] in (1, 2)
    whole = json.loads(next((out / "runs").glob("*-bert-textfooler-*.json")).read_text())  # the whole split's attack
    assert whole["resources"]["attack"]["synonyms"]["cut"]["texts"] == "tiny sst2 dev"  # read from the cut
    saturation = json.loads((out / "saturation.json").read_text())
    assert [r["jobs"] for r in saturation["rounds"]] == [1, 2] and saturation["saturating_jobs"] == state["jobs"]
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["device"] == "cpu" and set(calibration["calibrations"]) == {"bert", "imbert"}
    records = sorted((out / "runs").glob("*-advglue-*.json"))
    assert len(records) == 2 and {json.loads(p.read_text())["spec"]["train_size"] for p in records} == {64}
    assert sorted(p.name for p in (tmp_path / "bundle").iterdir()) == ["evidence-gpu.tar.gz", "summary.md"]
    with tarfile.open(tmp_path / "bundle" / "evidence-gpu.tar.gz") as tar:
        names = tar.getnames()
    assert f"out/runs/{records[0].name}" in names and "out/state.json" in names
    assert not any(n.endswith(".lock") for n in names)
    stamps = {p: p.stat().st_mtime_ns for p in [*(out / "bench").iterdir(), out / "saturation.json"]}
    runs = {p: p.read_bytes() for p in records}
    pack_results_dir(out, tmp_path / "cache")  # committed packed, as after a real lend

    # only extras are new
    second = _lend(tmp_path, tiny_data, tiny_backbone, lexicon_cut, "--steps", "attack,probe,claims,extra")
    assert "unpacked 5 committed run(s)" in second
    assert "claims: 2 finished before, 0 ran" in second and "extra: 0 finished before, 1 ran, 0 failed" in second
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps and {p: p.read_bytes() for p in runs} == runs
    assert json.loads((out / "state.json").read_text())["runs"] == 2
    assert "| freelb | 1 |" in (out / "summary.md").read_text()


def test_the_textattack_step_compares_both_attacks_on_the_subset_through_the_attack_steps_victim(tmp_path,
                                                                                                  monkeypatch):
    """Not in the pack, so not in the run above (TextAttack's import alone takes a minute here): its wiring."""
    from robench.bench import attack as bench

    (plan, steps, _), asked = _modules(), []
    monkeypatch.setattr(bench, "compare_attacks", lambda options, settings, console: asked.append(options))
    protocol = plan.PROTOCOLS["tiny"]
    steps.textattack_step(protocol, plan.Paths(tmp_path, tmp_path, None, None), "cpu")
    whole = bench.specs(steps.attack_options(protocol, "cpu", 4), "hub")[bench.ROBENCH]
    subset = bench.specs(asked[0], "hub")[bench.ROBENCH]
    assert asked[0].examples == protocol.textattack_examples
    assert dataclasses.replace(subset, eval_size=whole.eval_size) == whole  # the same victim and attack


def test_an_attack_step_cut_off_after_the_whole_split_measures_only_what_is_missing(tmp_path, monkeypatch):
    (plan, steps, _), called = _modules(), []

    def whole_split(protocol, options, settings, device, target):
        called.append(("whole", options.examples))
        return {"warm_up": 7.0, "forward_rate": 100.0}

    monkeypatch.setattr(steps, "attack_whole_split", whole_split)
    monkeypatch.setattr(steps, "calibrate", lambda *args: called.append("calibrate") or {"bert": {}})
    paths = plan.Paths(tmp_path / "out", tmp_path / "cache", None, None)
    protocol = plan.PROTOCOLS["tiny"]
    steps.attack_step(protocol, paths, "cpu")  # cut off after this, before the state said "done"
    (paths.out / "bench").mkdir(parents=True)
    (paths.out / "bench" / "attack-sst2-4-robench.md").write_text("the whole split's table\n")
    steps.attack_step(protocol, paths, "cpu")  # the next lend
    assert called == [("whole", 4), "calibrate", "calibrate"]
    measured = json.loads((paths.out / "calibration.json").read_text())
    assert measured["warm_up"] == 7.0 and measured["forward_rate"] == 100.0 and measured["calibrations"] == {"bert": {}}


def test_jobs_still_running_at_the_deadline_are_stopped_and_the_rest_not_started(tmp_path):
    plan, steps, standins = _modules()
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    jobs = [steps.Job("quick", [sys.executable, "-c", "print('done')"]), steps.Job("slow", sleep),
            steps.Job("queued", sleep)]
    import time

    start = time.monotonic()
    steps.run_jobs(jobs, 1, start + 3, tmp_path / "logs")  # the quick job takes ~0.05 s, the slow 60 s
    assert time.monotonic() - start < 30
    quick, slow, queued = jobs
    assert quick.returncode == 0 and not quick.killed and (tmp_path / "logs" / "quick.log").read_text() == "done\n"
    assert slow.killed and slow.returncode != 0
    assert queued.started == 0 and queued.returncode is None  # never started: the next lend runs it


def test_stand_ins_import_and_subclass_but_fail_on_use_even_when_the_use_is_swallowed():
    plan, steps, standins = _modules()
    assert "tabnanny" not in sys.modules  # installed (the standard library's), not imported yet
    with pytest.raises(plan.LendError, match="used packages that were not carried: tabnanny.data.Sentence"):
        with standins.standing_in(("tabnanny",)):
            import tabnanny
            from tabnanny.data import Sentence

            class Tokenizer(tabnanny.data.Tokenizer):  # subclassing at import time works
                pass

            assert not hasattr(tabnanny, "check") or not callable(getattr(tabnanny.check, "__code__", None))
            with pytest.raises(plan.LendError, match="tabnanny.data.Sentence was called"):
                Sentence("a text")
            try:
                Sentence("swallowed")
            except Exception:
                pass
            assert Tokenizer.__mro__[1].__qualname__ == "tabnanny.data.Tokenizer"
    for name in [m for m in sys.modules if m.partition(".")[0] == "tabnanny"]:
        del sys.modules[name]
    import tabnanny

    assert callable(tabnanny.check.__code__.co_name and tabnanny.check)  # the real module once the block is over
    del sys.modules["tabnanny"]


def test_a_cut_that_lacks_words_textattack_splits_the_dev_split_into_is_refused(tmp_path, tiny_data, lexicon_cut,
                                                                                  monkeypatch):
    import types

    from robench.attacks.textattack import compat
    from robench.core.paths import resolve_settings
    from robench.engine.words import split_words

    plan, steps, standins = _modules()
    monkeypatch.setenv("ROBENCH_LEXICON_CUT", str(lexicon_cut))
    monkeypatch.setattr(compat, "load_textattack", lambda settings: None)  # TextAttack's import takes a minute here
    utils = types.ModuleType("textattack.shared.utils")
    for name, module in (("textattack", types.ModuleType("textattack")),
                         ("textattack.shared", types.ModuleType("textattack.shared")),
                         ("textattack.shared.utils", utils)):
        monkeypatch.setitem(sys.modules, name, module)
    settings = resolve_settings(tiny_data, tmp_path / "cache", tmp_path / "out")
    protocol = plan.PROTOCOLS["tiny"]
    utils.words_from_text = split_words  # the words the cut was made of: accepted
    steps.check_cut_covers_textattack(protocol, settings)
    utils.words_from_text = lambda text: [w + "zz" for w in split_words(text)]
    with pytest.raises(plan.LendError, match="lacks .* words TextAttack splits the dev split into"):
        steps.check_cut_covers_textattack(protocol, settings)


def test_the_claim_verdict_tests_the_claimed_size():
    """The lend of 2026-12-04 passed the claimed +8.3 where the refuting p-value belongs: never refuted."""
    from types import SimpleNamespace

    asked = []

    class PairedTest:
        varies = True

        def p_value_at(self, difference: float) -> float:
            asked.append(difference)
            return 0.01

    c = SimpleNamespace(verdict="not distinguishable from the baseline", adjusted_p=0.125, test=PairedTest(),
                        difference=SimpleNamespace(value=0.027), setting=SimpleNamespace(spec={"model": "imbert"}))
    assert _module("gpu_lend_summary")._claim_verdict([c]) == {id(c): "IM-BERT, AdvGLUE-sst2, +8.3 points: refuted"}
    assert asked == [pytest.approx(0.083)]
