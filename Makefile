# Two commands on a fresh machine:
#   make demo   - set everything up, then fine-tune the embedded default (MiniLM) on SST-2 and replay AdvGLUE
#   make test   - set everything up, then run the test suite
# Both are idempotent: the virtualenv is (re)built only when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.robench-installed
export ROBENCH_DATA_DIR ?= $(abspath ../shared/data)
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1

.PHONY: setup demo test test-deps clean

setup: $(STAMP)

# torch first, pinned: the 2.13.0 CPU wheel; an unpinned torch would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

demo: setup
	$(BIN)/robench run --model bert --attack advglue --task sst2 --train-size 2000 --epochs 3

# System packages some tests need: headless Chromium for tests/test_leaderboard_page.py, which fails (and never
# installs anything) without them. Debian/Ubuntu apt; as root, or through sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
test-deps:
	@test -x /usr/bin/chromium && test -x /usr/bin/chromedriver || \
	  ($(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
	     --no-install-recommends chromium chromium-driver >/dev/null)

test: setup test-deps
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n auto --maxprocesses 4

clean:
	rm -rf $(VENV) .pytest_cache
