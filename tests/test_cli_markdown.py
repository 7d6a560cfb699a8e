"""The committed CLI reference (docs/guide/cli*.md) is what robench.cli.markdown writes from the real parser."""
from __future__ import annotations

from pathlib import Path

import pytest

from robench.cli import build_parser
from robench.cli.markdown import PAGES, cli_markdown

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide"


@pytest.mark.parametrize("page", [page.name for page in PAGES])
def test_committed_cli_reference_matches_the_parser(page):
    committed = (GUIDE / page).read_text(encoding="utf-8")
    assert committed == cli_markdown(build_parser())[page], f"docs/guide/{page} is stale: run `make cli-doc`"


def test_every_command_and_flag_is_documented_once_in_full():
    pages = cli_markdown(build_parser())
    text = "\n".join(pages.values())
    for name in ("run", "train", "leaderboard", "compare", "show", "grid", "resources list", "bench attack",
                 "annotate export"):
        assert f"`robench {name}`" in text
    assert sum(page.count("- `--checkpoint PATH_OR_HUB_ID`:") for page in pages.values()) == 1
    assert "As in [`robench run`](#robench-run): `--model`" in pages["cli.md"]  # train's flags point to run's


def test_the_bench_help_reads_each_default_from_the_options_dataclass(monkeypatch):
    """A benchmark's defaults live once, in robench.bench.options: change one there and the help names the new
    value (a help string that wrote the number itself would keep the old one)."""
    import dataclasses

    from robench.bench.options import DefensesOptions

    train_size = next(f for f in dataclasses.fields(DefensesOptions) if f.name == "train_size")
    monkeypatch.setattr(train_size, "default", 1234)
    fresh = build_parser.__wrapped__()  # not the cached parser, built before the change
    assert "`--train-size TRAIN_SIZE`: training subset (default 1234)" in cli_markdown(fresh)["cli-bench.md"]
