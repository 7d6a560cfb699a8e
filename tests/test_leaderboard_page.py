"""The static leaderboard page, opened in real headless Chromium (selenium + the system chromedriver).

Setup: needs the Debian packages chromium and chromium-driver, which `make test-deps` installs (`make test`
runs it first). Without them the test fails, saying so; it never installs anything itself.
The screenshot is saved to artifacts/leaderboard.png (gitignored).
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from robench.core.records import RunRecord

REPO = Path(__file__).resolve().parents[1]
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1500,1900"]

MODELS = {"bert": 0.80, "imbert": 0.78, "freelb": 0.84}  # clean (dev) accuracy at seed 0
ROBUST = {("bert", "advglue"): 0.40, ("imbert", "advglue"): 0.50, ("freelb", "advglue"): 0.45,
          ("bert", "textfooler"): 0.10, ("imbert", "textfooler"): 0.30, ("freelb", "textfooler"): 0.20}


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


def _write_records(runs_dir: Path) -> None:
    """Records with known metrics: 2 tasks x 3 models x 2 attacks x 2 seeds."""
    runs_dir.mkdir(parents=True)
    for task in ("sst2", "rte"):
        for (model, attack), robust in ROBUST.items():
            for seed in (0, 1):
                spec = {"task": task, "model": model, "attack": attack, "backbone": "minilm", "seed": seed,
                        "train_size": 500, "eval_size": 20}
                metrics = {"dev_accuracy": MODELS[model] + 0.02 * seed, "clean_accuracy": MODELS[model],
                           "robust_accuracy": robust + 0.02 * seed,
                           "attack_success_rate": None if attack == "advglue" else 1 - robust,
                           "avg_queries": None if attack == "advglue" else 100 * robust + seed}
                run_id = f"{task}-{model}-{attack}-s{seed}"
                record = RunRecord(run_id=run_id, spec=spec, hyperparameters={}, metrics=metrics,
                                   resources={"backbone": {"name": "minilm", "fingerprint": "gt==0.1"},
                                              "data": {"source": "local"}, "attack": {"synonyms": "test list"}},
                                   timings={"train_seconds": 60.0 + seed}, checkpoint="ckpt")
                (runs_dir / f"{run_id}.json").write_text(json.dumps(asdict(record)))


def _column(driver, table, header: str) -> list[str]:
    headers = [th.text.strip(" ▲▼") for th in table.find_elements("css selector", "thead th")]
    index = headers.index(header)
    return [row.find_elements("css selector", "td")[index].text
            for row in table.find_elements("css selector", "tbody tr")]


def test_leaderboard_page_in_headless_chromium(tmp_path, browser):
    from robench.cli import main

    _write_records(tmp_path / "results" / "runs")
    page = tmp_path / "site" / "leaderboard.html"
    assert main(["leaderboard", "--results-dir", str(tmp_path / "results"), "--html", str(page)]) == 0
    assert (tmp_path / "results" / "leaderboard.csv").is_file() and (tmp_path / "results" / "leaderboard.md").is_file()
    html = page.read_text()
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in html

    browser.get(page.as_uri())
    tables = browser.find_elements("css selector", "table.board")
    assert [t.get_attribute("id") for t in tables] == ["table-rte", "table-sst2"]
    sst2 = browser.find_element("id", "table-sst2")
    assert len(sst2.find_elements("css selector", "tbody tr")) == 3
    assert _column(browser, sst2, "Model") == ["bert", "freelb", "imbert"]
    assert _column(browser, sst2, "Clean acc.") == ["81.0 ± 1.4", "85.0 ± 1.4", "79.0 ± 1.4"]
    assert _column(browser, sst2, "textfooler success") == ["90.0 ± 0.0", "80.0 ± 0.0", "70.0 ± 0.0"]

    header = next(th for th in sst2.find_elements("css selector", "thead th") if th.text == "textfooler acc.")
    header.click()
    assert _column(browser, sst2, "Model") == ["bert", "freelb", "imbert"]  # 11, 21, 31 ascending
    header.click()
    assert _column(browser, sst2, "Model") == ["imbert", "freelb", "bert"]
    assert _column(browser, sst2, "textfooler acc.") == ["31.0 ± 1.4", "21.0 ± 1.4", "11.0 ± 1.4"]
    assert header.get_attribute("aria-sort") == "descending"
    next(th for th in sst2.find_elements("css selector", "thead th") if th.text == "Clean acc.").click()
    assert _column(browser, sst2, "Model") == ["imbert", "bert", "freelb"]
    assert len(browser.find_element("id", "table-rte").find_elements("css selector", "tbody tr")) == 3

    for task in ("sst2", "rte"):
        scatter, bars = browser.find_element("id", f"scatter-{task}"), browser.find_element("id", f"bars-{task}")
        assert scatter.size["width"] > 300 and bars.size["height"] > 200
        assert len(scatter.find_elements("css selector", "circle")) == 6
        assert len(bars.find_elements("css selector", "rect.bar")) == 6

    links = sst2.find_elements("css selector", "tbody tr")[0].find_elements("css selector", "td:last-child a")
    assert len(links) == 4
    for link in links:
        assert Path(unquote(urlparse(link.get_attribute("href")).path)).is_file()

    shot = REPO / "artifacts" / "leaderboard.png"
    shot.parent.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(shot))
    print(f"screenshot: {shot}")
