# Two commands do everything on a fresh machine: `make demo` (the main job) and `make test`.
PYTHON ?= python3
STAMP := .make/installed

.PHONY: install browser promtool alertmanager demo test lint docs reference docs-outputs kafka kafka-stop accuracy clean

# The import rules (docs/contributing, Architecture): which stage may import which (import-linter, contracts in
# pyproject.toml), the same contracts at run time (what importing each stage really loads), and private
# modules only from their own package and its tests.
LINT_IMPORTS = $(PYTHON) -c "from importlinter.cli import lint_imports_command; lint_imports_command()" --no-cache
IMPORT_RULES = $(PYTHON) -m pytest -q -p no:cacheprovider tests/test_import_rules.py tests/test_runtime_imports.py \
	tests/test_public_names.py
# The docs site, strict: a broken link or anchor, a page missing from the nav or a snippet gone fails it,
# naming the page. (The variable only silences the theme's notice about MkDocs 2.)
MKDOCS_BUILD = NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict

$(STAMP): pyproject.toml
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[consumer,otlp,dev]'
	@mkdir -p .make && touch $(STAMP)

# The stamp lies when this interpreter's tracescore is another checkout (an editable install made from a
# second clone): then install again. Run from / so the current directory does not shadow the install.
.PHONY: check-install
check-install:
	@cd / && $(PYTHON) -c "import pathlib, sys, tracescore; \
		sys.exit(pathlib.Path(tracescore.__file__).resolve().parents[1] != pathlib.Path('$(CURDIR)').resolve())" \
		2>/dev/null || rm -f $(CURDIR)/$(STAMP)

install: check-install $(STAMP)

## make demo: real Kafka broker, example RAG app, consumer, scores, alerts; ends by itself
demo: check-install $(STAMP)
	$(PYTHON) examples/demo.py

## make browser: Debian's Chromium, for the test that opens the HTML report in a real browser
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing chromium (apt-get)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

## make promtool: Prometheus' promtool, for the test of the shipped alerting rules
promtool:
	@command -v promtool >/dev/null 2>&1 || { \
		echo "installing prometheus (for promtool, apt-get)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; }

## make alertmanager: Debian's Prometheus and Alertmanager (with amtool), for the alerting tests that run
## the real programs (tests/alert, tests/deploy)
alertmanager:
	@{ command -v prometheus >/dev/null 2>&1 && command -v prometheus-alertmanager >/dev/null 2>&1 \
		&& command -v amtool >/dev/null 2>&1; } || { \
		echo "installing prometheus and prometheus-alertmanager (apt-get)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus prometheus-alertmanager >/dev/null; }

# pytest runs with bytecode written (into the __pycache__ folders git ignores) even where PYTHONDONTWRITEBYTECODE
# is set (our shared machine): without it every worker rewrote every test module's asserts again (18 of its 27
# CPU seconds of collection; 9 with pytest's cache), and every Python process the tests start (services, CLIs,
# the example app) compiled tracescore from source (a sixth of its import's CPU).

# pytest's parallel workers (pytest-xdist). The tests mostly wait (on brokers, services, idle timeouts), so
# more workers than CI's two cores pay; they share one broker that the xdist controller runs.
# Six ran 504-530 s of pytest against 710 with four (the same CPU-seconds), eight 458 s (the long Kafka tests
# leave cores idle while they wait on group joins and stop budgets). The one failure seen at six was a test's
# premise: kill(SIGSTOP) returns before every thread of a broker has stopped, and under load a "paused" broker
# answered (tests/_helpers.py `paused`; BENCHMARKS.md, Test suite time). `make test PYTEST_WORKERS=0` runs
# them one after another in one process. The 25 slowest steps are listed at the end, where speeding up the
# suite starts.
PYTEST_WORKERS ?= 8

# Each worker collects the whole suite: on a fresh clone each rewrote every test module's asserts and compiled
# tracescore itself (10-12 CPU-s a worker, ~5 once written). One collection beside the lint steps (which use one
# core of two) writes them first, so the workers start on the cached ones (BENCHMARKS.md, Test suite time).
WARM_COLLECTION = PYTHONDONTWRITEBYTECODE= $(PYTHON) -m pytest --collect-only -q -p no:cacheprovider >/dev/null 2>&1

## make test: lint, the docs build, unit tests and the integration tests against a real Kafka broker
test: check-install $(STAMP) browser promtool alertmanager
	$(WARM_COLLECTION) & warm=$$!; \
		$(PYTHON) -m ruff check . && $(PYTHON) -m ruff format --check . && $(LINT_IMPORTS) && $(MKDOCS_BUILD); \
		status=$$?; wait $$warm; exit $$status
	PYTHONDONTWRITEBYTECODE= $(PYTHON) -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --durations=25

## make docs: build the documentation site into .make/site (python -m mkdocs serve to preview)
docs: $(STAMP)
	$(MKDOCS_BUILD)

## make reference: regenerate the reference pages from the code (CLI, settings, evaluation record,
## integrations' tested versions and what is read from each recorded producer); tests/docs checks them
reference: $(STAMP)
	$(PYTHON) docs/gen_reference.py

## make docs-outputs: rewrite the outputs the pages show (docs/examples/*.out, the quickstart's blocks)
## from a real run, after a change to what a command or example prints
docs-outputs: $(STAMP)
	TRACESCORE_DOCS_RECORD=1 $(PYTHON) -m pytest -q tests/docs

lint: $(STAMP)
	$(PYTHON) -m ruff check . && $(PYTHON) -m ruff format --check .
	$(LINT_IMPORTS)
	$(IMPORT_RULES)

## make kafka: start a detached development broker and print its bootstrap address
kafka: $(STAMP)
	@$(PYTHON) -m tracescore.testing.kafka_broker start

kafka-stop: $(STAMP)
	@$(PYTHON) -m tracescore.testing.kafka_broker stop

## make accuracy: the offline judge's balanced accuracy on the labelled HaluEval dev set
accuracy: $(STAMP)
	$(PYTHON) benchmarks/halueval_accuracy.py

clean:
	rm -rf .make build *.egg-info .pytest_cache .ruff_cache
