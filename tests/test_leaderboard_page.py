"""The static leaderboard page, opened in real headless Chromium (selenium + the system chromedriver), and its
layout: at 1280 x 800 and 1920 x 1080 the page never overflows horizontally, no two text labels of a plot
intersect (bounding boxes from `getBBox`), every row's links open its run pages, the sort and the task selector
work, and the rows are ranked by worst-case accuracy.

Setup: needs the Debian packages chromium and chromium-driver, which `make test-deps` installs (`make test`
runs it first). Without them the test fails, saying so; it never installs anything itself.
Screenshots go to the test's temporary directory (printed with `pytest -s`).
"""
from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from robench.core.hashing import content_hash
from robench.core.records import RunRecord
from robench.core.types import ExampleResult
from robench.runs.spec import RunSpec, TrainConfig
from robench.runs.store import RunStore

REPO = Path(__file__).resolve().parents[1]
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1500,1900"]
SIZES = [(390, 844), (1280, 800), (1920, 1080)]  # a phone, a laptop, a desktop
N = 40  # attacked examples per run

# sst2: eight model settings crowded together (clean 80-83%, worst case 30-44%), so that the scatter's labels must
# be placed around each other; rte: three. Per setting: dev accuracy, and examples left unbroken per attack
# (seed 1 keeps one more of each). The worst case is the first min(textfooler, bert-attack) examples.
SST2 = {("bert", ()): (0.810, {"advglue": 16, "textfooler": 14, "bert-attack": 13}),
        ("freelb", ()): (0.820, {"advglue": 18, "textfooler": 17, "bert-attack": 16}),
        ("smart", ()): (0.815, {"advglue": 17, "textfooler": 15, "bert-attack": 16}),
        ("imbert", ()): (0.805, {"advglue": 19, "textfooler": 16, "bert-attack": 15}),
        ("imbert", (("im_layers", (0, 1, 2)),)): (0.812, {"advglue": 20, "textfooler": 18, "bert-attack": 17}),
        ("imbert", (("im_layers", (0,)),)): (0.808, {"advglue": 15, "textfooler": 13, "bert-attack": 14}),
        ("imbert", (("im_steps", 3),)): (0.818, {"advglue": 16, "textfooler": 12, "bert-attack": 12}),
        ("imbert", (("im_gamma", 0.02),)): (0.802, {"advglue": 14, "textfooler": 16, "bert-attack": 11}),
        ("a2t", (("a2t_attack", "textfooler"), ("a2t_k", 50), ("a2t_min_cos", -1), ("a2t_max_rate", 0.3),
                 ("a2t_min_words", 0), ("a2t_query_budget", 1000))):  # a long setting: its cell must collapse
        (0.800, {"advglue": 15, "textfooler": 13, "bert-attack": 12})}
RTE = {("bert", ()): (0.66, {"advglue": 10, "textfooler": 8}),  # trained: 5+ points above RTE's majority class
       ("freelb", ()): (0.68, {"advglue": 12, "textfooler": 11}),  # (robench.runs.chance)
       ("imbert", ()): (0.65, {"advglue": 11, "textfooler": 9})}


def _require_chromium() -> None:
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        pytest.fail(f"the browser test needs headless Chromium ({', '.join(missing)} missing): run `make test-deps` "
                    "(installs the Debian packages chromium and chromium-driver)", pytrace=False)


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    _require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS + [f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


def _write_run(runs_dir: Path, task: str, model: str, params: dict, attack: str, seed: int, dev: float,
               kept: int) -> RunRecord:
    """A finished run whose first `kept` examples survive the attack and whose other examples are broken."""
    from robench.report.identity import resolved_model_params

    spec = RunSpec(task=task, model=model, attack=attack, seed=seed, train_size=500, eval_size=N,
                   model_params=params)
    statuses = ["failed"] * kept + ["successful"] * (N - kept)
    results = [ExampleResult(i, i % 2, f"example {i} text", f"example {i} text" if s == "failed" else
                             f"changed {i} text", i % 2, i % 2 if s == "failed" else 1 - i % 2, s, 3 * (i + 1), 3,
                             0 if s == "failed" else 1)
               for i, s in enumerate(statuses)]  # labels alternate: a model right on all of them trained
    metrics = {"examples": N, "dev_accuracy": dev, "clean_accuracy": 1.0, "robust_accuracy": kept / N,
               "attack_success_rate": (N - kept) / N, "avg_queries": None if attack == "advglue" else 30.0 + kept}
    from robench.engine.audit import AUDIT_FORMAT

    if attack != "advglue":  # the validity audit of a word-level attack (robench.engine.audit)
        metrics["validity"] = {"examples": N - kept, "swaps": 2 * (N - kept), "antonym_example_rate": 0.1,
                               "rates": {"synonym": 0.9, "inflection": 0.05, "antonym": 0.05, "unlisted": 0.0},
                               "format": AUDIT_FORMAT}
    if task == "rte" and model == "freelb":  # a defence with a certificate
        metrics["certified_accuracy"] = 0.25 + 0.05 * seed
    hyper = {"train": dataclasses.asdict(TrainConfig()),
             "model": {**resolved_model_params({"model": model}), **params}, "attack": {}}
    record = RunRecord(run_id=spec.run_id, spec=spec.to_dict(), hyperparameters=hyper,
                       resources={"backbone": {"name": "minilm", "fingerprint": "gt==0.1"},
                                  "data": {"source": "local", "eval_examples": N,
                                           "eval_indices_hash": content_hash(list(range(N)))}},
                       metrics=metrics, timings={"train_seconds": 60.0 + seed}, checkpoint="ckpt",
                       created=f"2026-01-01T00:00:0{seed}")
    RunStore(runs_dir, spec.run_id).finish(record, results)
    return record


def _write_records(runs_dir: Path) -> dict[str, list[RunRecord]]:
    out: dict[str, list[RunRecord]] = {}
    for task, settings in (("sst2", SST2), ("rte", RTE)):
        for ((model, params), (dev, kept)), seed in itertools.product(settings.items(), (0, 1)):
            for attack, k in kept.items():
                given = {name: list(v) if isinstance(v, tuple) else v for name, v in params}
                rec = _write_run(runs_dir, task, model, given, attack, seed, dev + 0.01 * seed, k + seed)
                out.setdefault(task, []).append(rec)
    return out


def _worst(kept: dict[str, int]) -> float:
    """Mean over the two seeds of the worst case over the word-level attacks (seed 1 keeps one more example)."""
    low = min(v for a, v in kept.items() if a != "advglue")
    return (low + low + 1) / 2 / N


TEXT_BOXES = """
const svg = arguments[0];
return Array.from(svg.querySelectorAll("text")).map(function (t) {
  const b = t.getBBox(), m = t.getCTM();
  const corners = [[b.x, b.y], [b.x + b.width, b.y], [b.x, b.y + b.height], [b.x + b.width, b.y + b.height]]
    .map(function (c) { const p = svg.createSVGPoint(); p.x = c[0]; p.y = c[1]; return p.matrixTransform(m); });
  const xs = corners.map(function (p) { return p.x; }), ys = corners.map(function (p) { return p.y; });
  return [Math.min.apply(null, xs), Math.min.apply(null, ys), Math.max.apply(null, xs), Math.max.apply(null, ys),
          t.textContent];
});
"""


MARK_BOXES = TEXT_BOXES.replace('querySelectorAll("text")', 'querySelectorAll(".mark, line.whisker")') \
    .replace("t.textContent", "t.getAttribute('class')")


def _set_viewport(driver, width: int, height: int) -> None:
    """The exact viewport, through Chrome's device-metrics override: resizing the window instead depends on the
    headless screen and on when the resize lands (under load a 1920 x 1080 viewport came out 1920 x 937)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    assert driver.execute_script("return [window.innerWidth, window.innerHeight]") == [width, height]


def _column(table, header: str) -> list[str]:
    headers = [th.text.strip(" ▲▼") for th in table.find_elements("css selector", "thead th")]
    index = headers.index(header)
    cells = [row.find_elements("css selector", "td")[index] for row in table.find_elements("css selector", "tbody tr")]
    if header == "Model":  # the model and its short label, without the expandable full setting
        return [" ".join(cell.find_element("css selector", ".name").text.split()) for cell in cells]
    return [cell.text.split("\n")[0] for cell in cells]


def _numbers(table, header: str) -> list[float]:
    """A column's values (the first number of each cell: the mean, before its verdict mark and interval)."""
    return [float(re.match(r"[0-9.]+", text).group()) for text in _column(table, header)]


def _header(table, text: str):
    return next(th for th in table.find_elements("css selector", "thead th") if th.text.strip(" ▲▼") == text)


CONTENT_HEIGHT = """
const boxes = Array.from(arguments[0].children).map(function (c) { return c.getBoundingClientRect(); })
  .filter(function (b) { return b.height > 0; });
return boxes.length ? Math.max.apply(null, boxes.map(function (b) { return b.bottom; }))
  - Math.min.apply(null, boxes.map(function (b) { return b.top; })) : 0;
"""


def _inside(driver, element, width: int) -> bool:
    """`element` is displayed and lies horizontally inside the viewport (no sideways scrolling to see it)."""
    left, right = driver.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.left, r.right]",
                                        element)
    return element.is_displayed() and left >= 0 and right <= width + 0.5


def _check_phone_rows(driver, name: str, width: int) -> None:
    """On a phone each row is a card: its worst case (and every verdict mark) inside the screen, the worst case
    right under the model, before the attacks' cells."""
    for row in driver.find_elements("css selector", "section.task:not([hidden]) table.board tbody tr"):
        worst = row.find_element("css selector", "td[data-col=worst-case]")
        assert _inside(driver, worst, width), f"{name}: a worst case off screen: {row.text[:60]!r}"
        assert worst.find_element("css selector", ".v").text, name
        for mark in row.find_elements("css selector", ".sig"):
            assert _inside(driver, mark, width), f"{name}: a verdict off screen: {row.text[:60]!r}"
        model, clean = (row.find_element("css selector", f"td[data-col={c}]") for c in ("model", "clean"))
        assert model.location["y"] < worst.location["y"] < clean.location["y"], name


def _check_layout(driver, shots: Path, name: str, width: int) -> None:
    """No horizontal overflow of the body, nor of a table: nothing behind a scrollbar at 1280 px and wider, and on a
    phone the rows are cards with the worst case and the verdicts on screen (`_check_phone_rows`); every model cell
    stays within four lines (long settings collapse); the intro is at most two lines; no two text labels of any
    visible plot intersect."""
    body = driver.execute_script("return [document.body.scrollWidth, document.body.clientWidth, "
                                 "document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert body[0] <= body[1] and body[2] <= body[3], f"{name}: horizontal overflow {body}"
    for wrap in driver.find_elements("css selector", "section.task:not([hidden]) .table-wrap"):
        sizes = driver.execute_script("return [arguments[0].scrollWidth, arguments[0].clientWidth]", wrap)
        assert sizes[0] <= sizes[1], f"{name}: the table scrolls sideways {sizes}"
    if width < 600:
        _check_phone_rows(driver, name, width)
    line = driver.execute_script("return parseFloat(getComputedStyle(document.body).lineHeight)")
    for cell in driver.find_elements("css selector", "section.task:not([hidden]) table.board td.text"):
        height = driver.execute_script(CONTENT_HEIGHT, cell)  # its content's, not the row's (a cell fills its row)
        assert height <= 4.5 * line, f"{name}: a model cell of {height} px: {cell.text!r}"
    if width >= 1280:
        intro = driver.find_element("css selector", "header p.note")
        assert intro.size["height"] <= 2.5 * line, f"{name}: the intro takes {intro.size['height']} px"
    svgs = driver.find_elements("css selector", "section.task:not([hidden]) svg.plot")
    assert svgs
    for svg in svgs:
        boxes = driver.execute_script(TEXT_BOXES, svg)
        assert all(b[2] > b[0] and b[3] > b[1] for b in boxes)  # rendered
        for a, b in itertools.combinations(boxes, 2):
            overlap = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
            assert overlap[0] <= 0.5 or overlap[1] <= 0.5, \
                f"{name}: labels {a[4]!r} and {b[4]!r} intersect in {svg.get_attribute('id')}"
        if "scatter" in svg.get_attribute("class"):  # a point's label crosses no point and no whisker
            labels = [b for b, t in zip(boxes, svg.find_elements("css selector", "text"))
                      if t.get_attribute("class") == "pt"]
            for a, b in itertools.product(labels, driver.execute_script(MARK_BOXES, svg)):
                overlap = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
                assert overlap[0] < 0 or overlap[1] < 0, f"{name}: label {a[4]!r} crosses a {b[4]}"
    assert driver.save_screenshot(str(shots / f"{name}.png"))


def test_leaderboard_page_in_headless_chromium(tmp_path, browser):
    from robench.cli import main

    records = _write_records(tmp_path / "results" / "runs")
    page = tmp_path / "site" / "leaderboard.html"
    assert main(["leaderboard", "--results-dir", str(tmp_path / "results"), "--html", str(page),
                 "--baseline", "bert", "--run-pages"]) == 0
    html = page.read_text()
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in html
    shots = tmp_path / "screenshots"
    shots.mkdir()

    browser.get(page.as_uri())
    assert [t.get_attribute("id") for t in browser.find_elements("css selector", "table.board")] == \
        ["table-rte", "table-sst2"]
    buttons = browser.find_elements("css selector", "#tasks button")
    assert [b.text for b in buttons] == ["rte", "sst2"]
    rte, sst2 = browser.find_element("id", "task-rte"), browser.find_element("id", "task-sst2")
    assert rte.is_displayed() and not sst2.is_displayed()  # the first task; the selector switches
    buttons[1].click()
    assert sst2.is_displayed() and not rte.is_displayed()

    table = browser.find_element("id", "table-sst2")
    assert len(table.find_elements("css selector", "tbody tr")) == len(SST2)  # one row per model setting
    expected = sorted(SST2.items(), key=lambda s: (-_worst(s[1][1]), -s[1][0]))
    assert _numbers(table, "Worst case") == [round(100 * _worst(k), 1) for _, (_, k) in expected]
    assert _column(table, "Rank")[0] == "1" and _column(table, "Model")[0] == "imbert im_layers=0,1,2"
    assert "Certified" not in [th.text for th in table.find_elements("css selector", "thead th")]
    labels = _column(table, "Model")
    assert sum(label.startswith("imbert") for label in labels) == 5 and "batch_size" not in " ".join(labels)
    assert "bert baseline" in labels  # the baseline row is marked; the other cells carry verdicts
    assert len(table.find_elements("css selector", "td .sig")) == 3 * (len(SST2) - 1)
    clean = _column(table, "Clean")
    assert clean[labels.index("bert baseline")] == "81.5 ± 0.7"

    _header(table, "TextFooler").click()  # best first
    audit = table.find_element("css selector", "td .audit")
    assert audit.text == "listed synonyms 95% · ant. 5.0%" and "antonym 5.0%" in audit.get_attribute("title")
    tf = _numbers(table, "TextFooler")
    assert tf == sorted(tf, reverse=True) and _column(table, "Model")[0] == "imbert im_layers=0,1,2"
    assert _header(table, "TextFooler").get_attribute("aria-sort") == "descending"
    _header(table, "TextFooler").click()
    assert _numbers(table, "TextFooler") == sorted(tf) and _column(table, "Model")[0] == "imbert im_steps=3"
    _header(table, "Rank").click()
    assert _column(table, "Rank") == sorted(_column(table, "Rank"), key=int)

    for width, height in SIZES:
        _set_viewport(browser, width, height)
        browser.get(page.as_uri())
        for i, task in enumerate(("rte", "sst2")):
            browser.find_elements("css selector", "#tasks button")[i].click()
            _check_layout(browser, shots, f"leaderboard-{task}-{width}x{height}", width)
    print(f"screenshots: {shots}")

    browser.find_elements("css selector", "#tasks button")[0].click()
    rte_table = browser.find_element("id", "table-rte")
    certified = dict(zip(_column(rte_table, "Model"), _column(rte_table, "Certified")))
    assert certified == {"freelb": "27.5", "bert baseline": "–", "imbert": "–"}

    # every row's links open its run pages: one link per run, to the page of that run's adversarial examples
    browser.get(page.as_uri())
    for task, button in (("rte", 0), ("sst2", 1)):
        browser.find_elements("css selector", "#tasks button")[button].click()
        rows = browser.find_element("id", f"table-{task}").find_elements("css selector", "tbody tr")
        hrefs = []
        for row in rows:
            links = [a.get_attribute("href") for a in row.find_elements("css selector", "td .runs a")]
            assert len(links) == len(next(iter(SST2.values()))[1] if task == "sst2" else
                                     next(iter(RTE.values()))[1]) * 2
            hrefs.append(links[0])
            for href in links:
                assert Path(unquote(urlparse(href).path)).is_file() and href.endswith(".html")
        assert {Path(unquote(urlparse(h).path)).stem for row in rows for h in
                [a.get_attribute("href") for a in row.find_elements("css selector", "td .runs a")]} == \
            {r.run_id for r in records[task]}
        for href in hrefs:  # open each row's first run page, then come back
            browser.get(href)
            run_id = Path(unquote(urlparse(href).path)).stem
            assert browser.find_element("css selector", "p.note code").text == run_id
            assert browser.find_element("css selector", "p.back a").get_attribute("href").endswith("leaderboard.html")
            browser.back()
            browser.find_elements("css selector", "#tasks button")[button].click()


def test_output_writes_outside_the_results_directory_and_run_pages_only_when_asked(tmp_path):
    from robench.cli import main

    results = tmp_path / "results"
    _write_records(results / "runs")
    before = sorted(p.name for p in results.rglob("*"))
    out = tmp_path / "site"
    assert main(["leaderboard", "--results-dir", str(results), "--output", str(out), "--html",
                 str(out / "board.html"), "--baseline", "bert"]) == 0
    assert sorted(p.name for p in results.rglob("*")) == before  # nothing written into the results directory
    assert {p.name for p in out.iterdir()} >= {"leaderboard.csv", "leaderboard.md", "settings.csv", "settings.md",
                                               "worstcase.json", "board.html"}
    page = (out / "board.html").read_text()
    assert not (out / "runs").exists() and ".json" in page  # a seed links its record, not a run page
    assert "What each column counts" in page and "the denominator of each attack&#x27;s accuracy" in page
    assert main(["leaderboard", "--results-dir", str(results), "--output", str(out), "--html",
                 str(out / "board.html"), "--run-pages"]) == 0
    assert len(list((out / "runs").glob("*.html"))) == len(list((results / "runs").glob("*.json")))
    assert main(["leaderboard", "--results-dir", str(results), "--run-pages"]) == 2  # needs --html


def test_scatter_labels_never_collide_even_when_every_point_is_in_one_spot():
    from robench.report.svg import Text, overlaps, place_labels, text_box

    fixed = [Text(100, 20, "a title", "title", "middle")]
    points = [(200 + (i % 3), 150 + (i % 2), f"imbert im_layers=0,{i}", str(i + 1)) for i in range(12)]
    placed = place_labels(points, (50, 30, 500, 340), fixed)
    boxes = [text_box(t) for t in placed]
    assert 1 <= len(placed) < len(points)  # the rest are named by the legend only
    assert not any(overlaps(a, b, 0) for a, b in itertools.combinations(boxes + [text_box(fixed[0])], 2))
    assert all(50 <= b[0] and b[2] <= 500 and 30 <= b[1] and b[3] <= 340 for b in boxes)
    spread = [(60 + 40 * i, 60 + 25 * i, f"model {i}", str(i)) for i in range(8)]
    assert [t.text for t in place_labels(spread, (50, 30, 500, 340))] == [f"model {i}" for i in range(8)]


def test_a_cell_marks_exactly_the_verdict_the_statistics_gave():
    """The mark comes from the verdict itself, not from words found in it: a verdict that only mentions
    "more robust" (or any text the statistics never give) is no "more robust" mark."""
    from robench.report.leaderboard_cells import verdict
    from robench.report.stats import INSUFFICIENT, LESS_ROBUST, MORE_ROBUST, NOT_DISTINGUISHABLE

    def mark(said, diff=0.02):
        row = {"robust_accuracy_diff": diff, "robust_accuracy_diff_verdict": said}
        return verdict(row, "bert")

    assert [mark(v)[:2] for v in (MORE_ROBUST, LESS_ROBUST, NOT_DISTINGUISHABLE, INSUFFICIENT)] == [
        ("up", "▲"), ("down", "▼"), ("same", "≈"), ("unsure", "?")]
    for said in ("not more robust than the baseline", "more robust than the baseline (insufficient seeds)",
                 "Less Robust", None):
        assert mark(said)[:2] == ("unsure", "?")
    assert mark(MORE_ROBUST)[2].endswith(f"points vs bert: {MORE_ROBUST}")
    assert mark(MORE_ROBUST, diff=float("nan")) is None
