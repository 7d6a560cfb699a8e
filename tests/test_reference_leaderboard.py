"""The committed reference leaderboard is regenerated bit for bit from the committed records it links to.

Records of an older format (their eval subset was chosen by the training seed) are skipped, and the page says
how many; every record the leaderboard includes is linked from the page."""
import shutil
from pathlib import Path

from robench.html import write_html
from robench.leaderboard import load_records, write_leaderboard

REFERENCE = Path(__file__).resolve().parents[1] / "results" / "reference"


def test_reference_leaderboard_regenerates_from_its_records(tmp_path):
    shutil.copytree(REFERENCE / "runs", tmp_path / "runs", ignore=shutil.ignore_patterns("*.html"))  # pages: rebuilt
    _, csv_path, md_path = write_leaderboard(tmp_path)
    html_path = write_html(tmp_path, tmp_path / "leaderboard.html")
    for path in (csv_path, md_path, Path(html_path)):
        assert path.read_bytes() == (REFERENCE / path.name).read_bytes(), path.name
    run_pages = sorted((REFERENCE / "runs").glob("*.html"))
    assert [p.name for p in run_pages] == sorted(p.name for p in (tmp_path / "runs").glob("*.html"))
    for path in run_pages:
        assert (tmp_path / "runs" / path.name).read_bytes() == path.read_bytes(), path.name


def test_every_included_reference_record_is_linked_and_the_skipped_are_counted():
    page = (REFERENCE / "leaderboard.html").read_text(encoding="utf-8")
    assert len(list((REFERENCE / "runs").glob("*.json"))) == 72  # 2 tasks x 4 models x 3 attacks x 3 seeds
    records = load_records(REFERENCE / "runs")
    assert len(records.current) + records.older == 72
    for rec in records.current:  # the page links each run's page of adversarial examples, which links its record
        assert f'href="runs/{rec.run_id}.html"' in page
        run_page = REFERENCE / "runs" / f"{rec.run_id}.html"
        assert f'href="{rec.run_id}.json"' in run_page.read_text(encoding="utf-8")
    assert page.count('href="runs/') == len(records.current)
    assert (f"Skipped {records.older} run record(s) of an older format" in page) == (records.older > 0)
