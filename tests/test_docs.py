"""The documentation holds together: every relative link of the README and docs/ reaches its file and heading; each
user guide stays under 10 KB, the guides together under 120 KB and the README under 8 KB (issues 44, 59)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _outside_code(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but hyphens dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", _outside_code(page.read_text(encoding="utf-8")), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_outside_code(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_reaches_its_file_and_heading(page):
    assert broken_links(page) == []


def test_the_checker_sees_a_broken_link_and_a_missing_heading(tmp_path):
    (tmp_path / "b.md").write_text("# Only this\n")
    page = tmp_path / "a.md"
    page.write_text("[ok](b.md#only-this) [file](c.md) [heading](b.md#other)\n```\n[in a code block](y.md)\n```\n")
    assert broken_links(page) == ["c.md", "b.md#other"]


GUIDES = sorted((DOCS / "guide").glob("*.md"))


@pytest.mark.parametrize("page", GUIDES, ids=lambda p: p.name)
def test_a_user_guide_stays_under_10_kb(page):
    assert page.stat().st_size <= 10_000, f"{page.name}: move method, measurements and history to docs/studies/"


def test_the_user_guides_together_stay_under_120_kb():
    total = sum(page.stat().st_size for page in GUIDES)
    assert total <= 120_000, f"docs/guide is {total:,} bytes: move method, measurements and history to docs/studies/"


def test_the_readme_stays_under_8_kb():
    assert (REPO / "README.md").stat().st_size <= 8_000
