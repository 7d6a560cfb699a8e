"""The committed reference leaderboard is regenerated bit for bit from the committed records it links to."""
import shutil
from pathlib import Path

from robench.html import write_html
from robench.leaderboard import write_leaderboard

REFERENCE = Path(__file__).resolve().parents[1] / "results" / "reference"


def test_reference_leaderboard_regenerates_from_its_records(tmp_path):
    shutil.copytree(REFERENCE / "runs", tmp_path / "runs")
    _, csv_path, md_path = write_leaderboard(tmp_path)
    html_path = write_html(tmp_path, tmp_path / "leaderboard.html")
    for path in (csv_path, md_path, Path(html_path)):
        assert path.read_bytes() == (REFERENCE / path.name).read_bytes(), path.name


def test_every_reference_row_links_to_existing_records():
    page = (REFERENCE / "leaderboard.html").read_text(encoding="utf-8")
    records = sorted((REFERENCE / "runs").glob("*.json"))
    assert len(records) == 72  # 2 tasks x 4 models x 3 attacks x 3 seeds (results/grid-reference.toml)
    assert all(f'href="runs/{path.name}"' in page for path in records)
