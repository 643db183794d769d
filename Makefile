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

.PHONY: install test test-fast demo bench bench-cli bench-levers bench-scale bench-scale-ann bench-rebuild bench-soak \
        bench-partitions bench-cloud verify-cloud clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check "uv==0.13.9"
	$(UV) pip install --quiet --python $(PY) -c constraints.txt -e '.[test]'
	# bytecode once, here: with PYTHONDONTWRITEBYTECODE set (as on this machine) every `kb`
	# command would otherwise compile its imports anew (benchmarks/results/cli-2026-12-06.md)
	$(PY) -m compileall -q -j 0 $(VENV)/lib kb_assets kb_mcp kb_shared > /dev/null
	touch $@

# Two pytest-xdist workers where tests share nothing (`make test PYTEST_WORKERS=` runs all in one
# process); the slow tests and the service suites (one Postgres, one Neo4j, built homes shared
# per session) run after them in one process (benchmarks/results/test-lanes.md). A worker that
# runs out of tests takes queued ones from the other (worksteal) instead of idling at the end.
PYTEST_WORKERS ?= -n 2 --dist worksteal

# pytest caches the test modules it rewrites (its assert messages) in __pycache__ only when
# bytecode may be written: with PYTHONDONTWRITEBYTECODE set, as on this machine, every run and
# every xdist worker rewrites all ~300 test modules again, ~7 s of CPU each
# (benchmarks/results/test-lanes.md).
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest

# pytest exits 5 when it collected nothing: when both halves of `make test` collected nothing,
# that is a broken test run, never a pass.
test: install
	@$(PYTEST) -m "not slow and not services" $(PYTEST_WORKERS) $(PYTEST_ARGS); first=$$?; \
	$(PYTEST) -m "slow or services" $(PYTEST_ARGS); second=$$?; \
	if [ $$first -eq 5 ] && [ $$second -eq 5 ]; then \
		echo "make test: pytest collected no tests - failing" >&2; exit 1; fi; \
	if [ $$first -ne 0 ] && [ $$first -ne 5 ]; then exit $$first; fi; \
	if [ $$second -ne 0 ] && [ $$second -ne 5 ]; then exit $$second; fi; \
	exit 0

# The developer's lane: every test but the slow ones (real-PDF builds, real servers), which
# `make test` still runs. Every asset is covered here on fake providers (tests/assets/test_assets.py).
# On PYTEST_WORKERS as `make test`'s first half; `make test-fast PYTEST_WORKERS=` runs it in one
# process (do that when KB_TEST_NEO4J_URI is set: the Neo4j suites share one database).

test-fast: install
	@$(PYTEST) -m "not slow" $(PYTEST_WORKERS) $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test-fast: pytest collected no tests - failing" >&2; exit 1; fi; \
	exit $$status

# Build DOCS (files or folders; default: a sample PDF kb generates) on the embedded
# default, then serve the Dagster UI on :3000 and the MCP server on :8765.
demo: install
	$(VENV)/bin/kb demo $(DOCS)

# Benchmarks (reports in benchmarks/results/, see benchmarks/README.md). `make bench` runs
# ingest on the shared corpus PDFs and on issue 28's 21-PDF corpus (benchmarks/corpora/
# eval21.txt, its home in benchmarks/work/ingest-eval21), then retrieval quality, citations,
# the levers left out in turn and serving latency; the first ingest leaves its KB_HOME in
# benchmarks/work/ingest for them.
# CLI start-up, cold, 5 runs a command (issue 28): benchmarks/results/cli-2026-12-06.md.
bench-cli: install
	$(PY) -m benchmarks.cli_timing --label after --bytecode cached

bench: install
	$(PY) -m benchmarks.ingest --mode-pages 10
	$(PY) -m benchmarks.ingest --corpus-list benchmarks/corpora/eval21.txt --skip-modes
	$(PY) -m benchmarks.retrieval --home benchmarks/work/ingest
	$(PY) -m benchmarks.citations $(BENCH_SETS)
	$(PY) -m benchmarks.lever_loso $(BENCH_SETS)
	$(PY) -m benchmarks.serving --home benchmarks/work/ingest

# The three shared eval sets over the builds benchmarks.retrieval caches (issue 25: citations
# true to the page and leave-one-set-out levers are measured on every set).
BENCH_SETS = --set regulatory=benchmarks/work/ingest \
	--set financebench=benchmarks/work/retrieval-financebench \
	--set financebench-dev=benchmarks/work/retrieval-financebench-dev

# Each issue-14 ranking lever on and off over the builds of both shared sets (make bench's
# retrieval homes; built by benchmarks.retrieval --eval ... --home ...).
bench-levers: install
	$(PY) -m benchmarks.retrieval_levers --set regulatory=benchmarks/work/fb/retrieval-regulatory --set financebench=benchmarks/work/fb/retrieval-financebench

bench-scale: install
	$(PY) -m benchmarks.scale

# The embedded index's dense strategies side by side (exact vec0 scan, binary codes + rescore,
# sqlite-vec bit[]), recall against exact search with filters; ~20+ min on a quiet machine.
bench-scale-ann: install
	$(PY) -m benchmarks.scale --sizes 10k,100k,1M --variant ann

# 16 MCP clients against kb-mcp for 10 min (issue 16, "Load"); builds its home once.
bench-soak: install
	$(PY) -m benchmarks.soak --minutes 10 --clients 16

# 10,000 generated documents through Dagster on a throwaway Postgres (issue 15).
bench-partitions: install
	bash -c 'source .ci/services.sh && kb_postgres_start && trap kb_postgres_stop EXIT && \
	  KB_DAGSTER_POSTGRES_URL=$$KB_TEST_POSTGRES_URL $(PY) -m benchmarks.partitions'

bench-rebuild: install
	$(PY) -m benchmarks.rebuild_cost

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

# The retrieval benchmark with Gemini embeddings and Cohere rerank beside the offline default;
# without both keys it says which are missing and measures nothing.
bench-cloud: install
	$(PY) -m benchmarks.retrieval --cloud --no-candidates

# One real call per cloud provider whose key is set; prints "skipped" for the others.
verify-cloud: install
	$(PY) benchmarks/verify_cloud.py
