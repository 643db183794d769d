# kb — the two commands:
#   make demo   set up, build a corpus on the embedded default, serve the Dagster UI + MCP server
#   make test   set up and run the tests (service suites skip with a reason unless their URLs are set)
#   make test-fast  the tests not marked slow (no real-PDF builds, no real servers)

PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
UV     := $(VENV)/bin/uv
DOCS   ?=
PYTEST_ARGS ?=

.PHONY: install test test-fast demo bench bench-scale bench-rebuild verify-cloud clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check "uv==0.13.9"
	$(UV) pip install --quiet --python $(PY) -c constraints.txt -e '.[test]'
	touch $@

# pytest exits 5 when it collected nothing: that is a broken test run, never a pass.
test: install
	@$(PY) -m pytest $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests - failing" >&2; exit 1; fi; \
	exit $$status

# The developer's lane: every test but the slow ones (real-PDF builds, real servers), which
# `make test` still runs. Every asset is covered here on fake providers (tests/assets/test_assets.py).
test-fast: install
	@$(PY) -m pytest -m "not slow" $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test-fast: pytest collected no tests - failing" >&2; exit 1; fi; \
	exit $$status

# Build DOCS (files or folders; default: a sample PDF kb generates) on the embedded
# default, then serve the Dagster UI on :3000 and the MCP server on :8765.
demo: install
	$(VENV)/bin/kb demo $(DOCS)

# Benchmarks (reports in benchmarks/results/, see benchmarks/README.md). `make bench` runs
# ingest, retrieval quality and serving latency on the shared corpus; ingest leaves its
# KB_HOME in benchmarks/work/ingest for the other two.
bench: install
	$(PY) -m benchmarks.ingest --mode-pages 10
	$(PY) -m benchmarks.retrieval --home benchmarks/work/ingest
	$(PY) -m benchmarks.serving --home benchmarks/work/ingest

bench-scale: install
	$(PY) -m benchmarks.scale

bench-rebuild: install
	$(PY) -m benchmarks.rebuild_cost

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

# One real call per cloud provider whose key is set; prints "skipped" for the others.
verify-cloud: install
	$(PY) benchmarks/verify_cloud.py
