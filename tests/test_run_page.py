"""The per-run adversarial-examples page, opened in headless Chromium (see test_leaderboard_page.py for setup).

The screenshot is saved to artifacts/run_page.png (gitignored).
"""
from __future__ import annotations

from pathlib import Path

from test_leaderboard_page import REPO, browser  # noqa: F401  (the session's headless Chromium)

from robench.cli import main
from robench.core.records import RunRecord
from robench.core.types import ExampleResult
from robench.runs.spec import RunSpec
from robench.runs.store import RunStore

SPEC = RunSpec(task="sst2", model="bert", attack="textfooler", backbone="minilm", seed=0, train_size=100)
RUN_ID = SPEC.run_id  # a record's run id hashes from its spec, or reports skip it
EXAMPLES = [
    ExampleResult(0, 1, "a fine, moving film .", "a decent, moving film .", 1, 0, "successful", 12, 4, 1),
    ExampleResult(1, 0, "a dull film", "a dull film", 1, 1, "skipped", 1, 3, 0),
    ExampleResult(2, 1, "a great <b>film</b> indeed", "a big <b>film</b> indeed", 1, 1, "failed", 30, 4, 1),
    ExampleResult(3, 1, "the best comedy in years", "the top comedy in ages", 1, 0, "successful", 40, 5, 2),
    ExampleResult(4, 0, "flat and lifeless", "flat and lifeless", -1, -1, "error", 3, 3, 0, "ValueError: boom"),
]


def write_run(runs_dir: Path) -> None:
    spec = SPEC.to_dict()
    metrics = {"dev_accuracy": 0.8, "clean_accuracy": 0.75, "robust_accuracy": 0.25, "attack_success_rate": 2 / 3,
               "avg_queries": 27.3}
    record = RunRecord(RUN_ID, spec, {}, {}, metrics, {"train_seconds": 5.0}, "ckpt")
    RunStore(runs_dir, RUN_ID).finish(record, EXAMPLES)


def _visible(driver) -> list[str]:
    return [row.find_elements("css selector", "td")[0].text
            for row in driver.find_elements("css selector", "#examples tbody tr") if row.is_displayed()]


def test_run_page_filters_by_outcome_and_marks_changed_words(tmp_path, browser):  # noqa: F811
    write_run(tmp_path / "results" / "runs")
    page = tmp_path / "site" / "run.html"
    assert main(["show", RUN_ID[:20], "--results-dir", str(tmp_path / "results"), "--html", str(page)]) == 0
    html = page.read_text()
    assert "http://" not in html and "https://" not in html and "<b>film</b>" not in html  # escaped, offline

    browser.get(page.as_uri())
    assert _visible(browser) == ["0", "1", "2", "3", "4"]
    rows = browser.find_elements("css selector", "#examples tbody tr")
    assert [m.text for m in rows[0].find_elements("css selector", "mark.removed")] == ["fine"]
    assert [m.text for m in rows[0].find_elements("css selector", "mark.added")] == ["decent"]
    assert [m.text for m in rows[3].find_elements("css selector", "mark.added")] == ["top", "ages"]
    assert rows[1].find_elements("css selector", "mark") == []  # skipped: nothing changed
    assert "a big <b>film</b> indeed" in rows[2].text  # shown as text, not markup
    cells = rows[0].find_elements("css selector", "td")
    assert [c.text for c in cells[:5]] == ["0", "successful", "positive", "positive → negative", "12"]
    assert "ValueError: boom" in rows[4].text
    mark = rows[0].find_element("css selector", "mark.added")
    assert mark.value_of_css_property("background-color") != rows[0].value_of_css_property("background-color")

    browser.find_element("css selector", "input[value=successful]").click()
    assert _visible(browser) == ["0", "3"] and browser.find_element("id", "shown").text == "2 shown"
    browser.find_element("css selector", "input[value=failed]").click()
    assert _visible(browser) == ["2"]
    browser.find_element("css selector", "input[value=all]").click()
    assert len(_visible(browser)) == 5
    record_link = browser.find_element("css selector", "p.note a")
    assert record_link.get_attribute("href").endswith(f"/results/runs/{RUN_ID}.json")

    shot = REPO / "artifacts" / "run_page.png"
    shot.parent.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(shot))


def test_run_page_stacks_the_texts_on_a_phone_and_fits_wider_screens(tmp_path, browser):  # noqa: F811
    """At 390 px each example is a card whose original and adversarial texts are stacked at full width, on screen;
    at 1280 and 1920 px the table fits (nothing behind a scrollbar) with the texts side by side."""
    from test_leaderboard_page import SIZES, _inside, _set_viewport

    write_run(tmp_path / "results" / "runs")
    page = tmp_path / "site" / "run.html"
    assert main(["show", RUN_ID[:20], "--results-dir", str(tmp_path / "results"), "--html", str(page)]) == 0
    for width, height in SIZES:
        _set_viewport(browser, width, height)
        browser.get(page.as_uri())
        sizes = browser.execute_script("const e = document.documentElement; return [e.scrollWidth, e.clientWidth]")
        assert sizes[0] <= sizes[1], f"{width} px: the page scrolls sideways {sizes}"
        for row in browser.find_elements("css selector", "#examples tbody tr"):
            original, adversarial = row.find_elements("css selector", "td.text")
            assert _inside(browser, original, width) and _inside(browser, adversarial, width), width
            if width < 600:  # stacked: the adversarial text under the original, each as wide as the card
                assert adversarial.location["y"] >= original.location["y"] + original.size["height"] - 1
                assert original.size["width"] > 0.8 * (width - 40)
            else:  # side by side
                assert adversarial.location["y"] == original.location["y"]
                assert adversarial.location["x"] > original.location["x"]
        browser.save_screenshot(str(tmp_path / f"run-{width}.png"))


def test_leaderboard_links_each_run_to_its_page(tmp_path, browser):  # noqa: F811
    write_run(tmp_path / "results" / "runs")
    page = tmp_path / "site" / "leaderboard.html"
    assert main(["leaderboard", "--results-dir", str(tmp_path / "results"), "--html", str(page), "--run-pages"]) == 0
    assert (tmp_path / "site" / "runs" / f"{RUN_ID}.html").is_file()  # run pages only when asked (--run-pages)

    browser.get(page.as_uri())
    link = browser.find_element("css selector", "#table-sst2 tbody tr span.runs a")  # in the attack's cell
    assert link.text == "s0" and link.get_attribute("href").endswith(f"/site/runs/{RUN_ID}.html")
    link.click()
    assert len(browser.find_elements("css selector", "#examples tbody tr")) == len(EXAMPLES)
    browser.find_element("css selector", "p.back a").click()
    assert browser.find_elements("css selector", "table.board")
