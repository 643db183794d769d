# shellcheck shell=bash
# Throwaway Postgres 15 and Neo4j 5.26 servers on loopback, for the service test suites.
#
# Sourced by .ci/run; also usable by hand from the repository root:
#
#   source .ci/services.sh
#   kb_services_start            # exports KB_TEST_POSTGRES_URL and KB_TEST_NEO4J_URI
#   .venv/bin/python -m pytest tests/stores -q
#   kb_services_stop             # stops both servers and deletes their data
#   kb_postgres_pause / kb_postgres_resume, kb_neo4j_pause / kb_neo4j_resume
#                                # stop one server and start it again, data and port kept
#
# Everything lives in one temporary folder ($KB_SERVICES_DIR, on the /dev/shm RAM disk when
# there is one with 2 GiB free): the Postgres cluster (initdb'd fresh, owned by the `postgres` user when run
# as root, since Postgres refuses to run as root), the Neo4j store, their logs. Ports are
# free ports picked by the OS (bind to port 0).
# Nothing is installed by kb_services_start; kb_postgres_install and kb_chromium_install (apt,
# root only), kb_neo4j_fetch (Maven Central) and kb_conformance_install (npm) do that and are
# called by .ci/run.
#
# This file sets no shell options, so sourcing it into an interactive shell changes nothing
# but these functions and the KB_* variables; every function returns non-zero on failure.

KB_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KB_PG_MAJOR=15
# Where the Neo4j jars are cached (gitignored); .ci/neo4j/pom.xml says which version.
KB_NEO4J_JARS="${KB_NEO4J_JARS:-$KB_REPO_ROOT/.ci/cache/neo4j-jars}"
# Seconds to wait for each server to accept connections before giving up.
KB_SERVICE_START_TIMEOUT="${KB_SERVICE_START_TIMEOUT:-180}"
# JVM heap for the test Neo4j: test graphs are tiny; the 2-core / 24 GiB CI machine has room.
KB_NEO4J_JAVA_OPTS="${KB_NEO4J_JAVA_OPTS:--Xms256m -Xmx1g}"

_kb_log() { printf '[services] %s\n' "$*" >&2; }

# Wall-clock seconds as a float ($EPOCHREALTIME uses the locale's decimal mark).
_kb_now() { local t=$EPOCHREALTIME; echo "${t/,/.}"; }

# A Python for port picking and the Bolt wait (needs the `neo4j` driver: the project venv).
_kb_python() {
    if [[ -x "$KB_REPO_ROOT/.venv/bin/python" ]]; then
        "$KB_REPO_ROOT/.venv/bin/python" "$@"
    else
        python3 "$@"
    fi
}

# Seconds since $1 (a _kb_now value), one decimal.
_kb_elapsed() { _kb_python -c 'import sys, time; print(f"{time.time() - float(sys.argv[1]):.1f}")' "$1"; }

# A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it).
kb_free_port() {
    _kb_python -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# The Postgres 15 bin directory (Debian layout first), or nothing.
kb_pg_bindir() {
    local dir="/usr/lib/postgresql/$KB_PG_MAJOR/bin"
    if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then
        echo "$dir"
        return 0
    fi
    if command -v initdb >/dev/null 2>&1 && initdb --version 2>/dev/null | grep -q " $KB_PG_MAJOR\."; then
        dirname "$(command -v initdb)"
        return 0
    fi
    return 1
}

# Install Debian's `postgresql` (15 on Debian 12) unless initdb/pg_ctl 15 are already there.
# Runs `apt-get update` only when the install fails with the package lists as they are.
kb_postgres_install() {
    local bindir
    if bindir="$(kb_pg_bindir)"; then
        _kb_log "Postgres $KB_PG_MAJOR already installed ($bindir): skipping apt"
        return 0
    fi
    if [[ $EUID -ne 0 ]]; then
        _kb_log "Postgres $KB_PG_MAJOR not found; install it with: sudo apt-get install -y postgresql"
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q postgresql; then
        _kb_log "apt-get install failed with the current package lists; running apt-get update"
        apt-get update -q || return 1
        apt-get install -y -q postgresql || return 1
    fi
    kb_pg_bindir >/dev/null || { _kb_log "postgresql installed but initdb $KB_PG_MAJOR not found"; return 1; }
}

# Debian's `chromium` for the browser tests (tests/browser.py drives it through Playwright's
# Python package; nothing downloads a browser). Skipped when one is already installed.
kb_chromium_install() {
    if command -v chromium >/dev/null 2>&1; then
        _kb_log "chromium already installed ($(command -v chromium)): skipping apt"
        return 0
    fi
    if [[ $EUID -ne 0 ]]; then
        _kb_log "chromium not found; install it with: sudo apt-get install -y chromium"
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q --no-install-recommends chromium; then
        _kb_log "apt-get install failed with the current package lists; running apt-get update"
        apt-get update -q || return 1
        apt-get install -y -q --no-install-recommends chromium || return 1
    fi
}

# The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned by
# .ci/conformance/package-lock.json) for tests/mcp/test_conformance.py: `npm ci` into
# .ci/conformance/node_modules (gitignored) unless it already holds this lock file's install.
# Needs Node 20 or later (the pinned 0.1.10 is the last release that runs on Node 20; Debian 12's
# own nodejs is 18, so Node comes with the machine, not from apt here).
kb_conformance_install() {
    local dir="$KB_REPO_ROOT/.ci/conformance" want major
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 \
        || { _kb_log "node and npm not found: the MCP conformance suite needs Node 20 or later"; return 1; }
    major="$(node -p 'process.versions.node.split(".")[0]')" || return 1
    if (( major < 20 )); then
        _kb_log "node $(node --version) is too old: the MCP conformance suite needs Node 20 or later"
        return 1
    fi
    want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)" || return 1
    if [[ -f "$dir/node_modules/.lock.sha256" && "$(cat "$dir/node_modules/.lock.sha256")" == "$want" ]]; then
        _kb_log "MCP conformance suite already installed in $dir/node_modules"
        return 0
    fi
    (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) \
        || { _kb_log "npm ci failed in $dir"; return 1; }
    echo "$want" >"$dir/node_modules/.lock.sha256"
    _kb_log "MCP conformance suite $(node -p "require('$dir/node_modules/@modelcontextprotocol/conformance/package.json').version") installed (node $(node --version))"
}

# Fetch the Neo4j jars into $KB_NEO4J_JARS unless a complete copy for this pom is there.
# A copy is complete when its stamp holds the pom's SHA-256 (written after the download).
kb_neo4j_fetch() {
    local pom="$KB_REPO_ROOT/.ci/neo4j/pom.xml" want tmp log
    want="$(sha256sum "$pom" | cut -d' ' -f1)" || return 1
    if [[ -f "$KB_NEO4J_JARS/.pom.sha256" && "$(cat "$KB_NEO4J_JARS/.pom.sha256")" == "$want" ]]; then
        _kb_log "Neo4j jars cached in $KB_NEO4J_JARS ($(find "$KB_NEO4J_JARS" -name '*.jar' | wc -l) jars)"
        return 0
    fi
    command -v mvn >/dev/null 2>&1 || { _kb_log "mvn not found (apt-get install -y maven)"; return 1; }
    tmp="$KB_NEO4J_JARS.partial"
    rm -rf "$tmp"
    log="$(mktemp)" || return 1
    if ! mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$tmp" >"$log" 2>&1; then
        _kb_log "mvn could not fetch the Neo4j jars:"
        tail -40 "$log" >&2
        rm -rf "$tmp" "$log"
        return 1
    fi
    rm -f "$log"
    echo "$want" >"$tmp/.pom.sha256"
    rm -rf "$KB_NEO4J_JARS"
    mv "$tmp" "$KB_NEO4J_JARS"
    _kb_log "fetched $(find "$KB_NEO4J_JARS" -name '*.jar' | wc -l) Neo4j jars into $KB_NEO4J_JARS"
}

# Run a command as the `postgres` user when we are root (Postgres refuses root), else as us.
_kb_as_pg() {
    if [[ $EUID -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

_kb_services_dir() {
    if [[ -z "${KB_SERVICES_DIR:-}" || ! -d "$KB_SERVICES_DIR" ]]; then
        # As root the cluster runs as `postgres`, which must reach it: /tmp, not root's TMPDIR.
        # A RAM disk when there is one: Neo4j syncs its transaction log at every commit.
        local base="${TMPDIR:-/tmp}"
        [[ $EUID -eq 0 ]] && base=/tmp
        # (only with 2 GiB free there: a container's /dev/shm is often 64 MiB)
        if [[ -d /dev/shm && -w /dev/shm ]] \
            && (( $(df -Pk /dev/shm | awk 'NR == 2 {print $4}') >= 2 * 1024 * 1024 )); then
            base=/dev/shm
        fi
        KB_SERVICES_DIR="$(mktemp -d "$base/kb-services.XXXXXX")" || return 1
        chmod 755 "$KB_SERVICES_DIR"
        export KB_SERVICES_DIR
    fi
}

# initdb a fresh cluster and start it on 127.0.0.1:<free port>; export KB_TEST_POSTGRES_URL.
kb_postgres_start() {
    local bindir port password dir started
    if [[ -n "${KB_PG_DATA:-}" ]] && _kb_as_pg "$(kb_pg_bindir)/pg_ctl" -D "$KB_PG_DATA" status >/dev/null 2>&1; then
        _kb_log "Postgres already running (127.0.0.1:$KB_PG_PORT)"
        return 0
    fi
    started="$(_kb_now)"
    bindir="$(kb_pg_bindir)" || { _kb_log "Postgres $KB_PG_MAJOR binaries not found (kb_postgres_install)"; return 1; }
    _kb_services_dir || return 1
    dir="$KB_SERVICES_DIR/postgres"
    mkdir -p "$dir" || return 1
    if [[ $EUID -eq 0 ]]; then
        id postgres >/dev/null 2>&1 || { _kb_log "no 'postgres' user to run Postgres as (apt-get install postgresql creates it)"; return 1; }
        chown postgres: "$dir" || return 1
    fi
    chmod 700 "$dir"
    password="$(_kb_python -c 'import secrets; print(secrets.token_hex(16))')" || return 1
    printf '%s\n' "$password" >"$dir/pwfile"
    [[ $EUID -eq 0 ]] && chown postgres: "$dir/pwfile"
    # TCP needs the password (scram); the Unix socket in $dir is for the local OS user only.
    _kb_as_pg "$bindir/initdb" -D "$dir/data" -U postgres --pwfile="$dir/pwfile" \
        --auth-host=scram-sha-256 --auth-local=peer --encoding=UTF8 --locale=C.UTF-8 \
        >"$dir/initdb.log" 2>&1 || { _kb_log "initdb failed:"; tail -20 "$dir/initdb.log" >&2; return 1; }
    rm -f "$dir/pwfile"
    port="$(kb_free_port)" || return 1
    _kb_pg_ctl_start "$bindir" "$dir" "$port" || return 1
    export KB_PG_BINDIR="$bindir" KB_PG_DATA="$dir/data" KB_PG_PORT="$port"
    export KB_TEST_POSTGRES_URL="postgresql+psycopg://postgres:$password@127.0.0.1:$port/postgres"
    KB_PG_START_SECONDS="$(_kb_elapsed "$started")"
    export KB_PG_START_SECONDS
    _kb_log "Postgres $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port ready in ${KB_PG_START_SECONDS}s (data $dir/data)"
}

# pg_ctl start of the cluster in $2/data on 127.0.0.1:$3 (binaries in $1), waiting for it.
_kb_pg_ctl_start() {
    local bindir="$1" dir="$2" port="$3"
    # A throwaway cluster: durability settings off for speed (nothing here must survive a crash).
    _kb_as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t "$KB_SERVICE_START_TIMEOUT" \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
        start >/dev/null || { _kb_log "Postgres did not start:"; tail -20 "$dir/postgres.log" >&2; return 1; }
}

# Stop the running cluster but keep its data, port and variables, for kb_postgres_resume
# (the outage tests: tests/stores/test_outages.py, tests/mcp/test_outages.py).
kb_postgres_pause() {
    [[ -n "${KB_PG_DATA:-}" && -d "$KB_PG_DATA" ]] || { _kb_log "no Postgres to pause (kb_postgres_start)"; return 1; }
    _kb_as_pg "$KB_PG_BINDIR/pg_ctl" -D "$KB_PG_DATA" -m fast -w -t 60 stop >/dev/null \
        || { _kb_log "pg_ctl stop failed (see $KB_PG_DATA/../postgres.log)"; return 1; }
    _kb_log "Postgres paused (127.0.0.1:$KB_PG_PORT refuses connections)"
}

# Start the cluster kb_postgres_pause stopped, on the same port with the same data.
kb_postgres_resume() {
    [[ -n "${KB_PG_DATA:-}" && -d "$KB_PG_DATA" ]] || { _kb_log "no Postgres to resume (kb_postgres_start)"; return 1; }
    if _kb_as_pg "$KB_PG_BINDIR/pg_ctl" -D "$KB_PG_DATA" status >/dev/null 2>&1; then
        return 0
    fi
    _kb_pg_ctl_start "$KB_PG_BINDIR" "$(dirname "$KB_PG_DATA")" "$KB_PG_PORT" || return 1
    _kb_log "Postgres resumed on 127.0.0.1:$KB_PG_PORT"
}

kb_postgres_stop() {
    [[ -n "${KB_PG_DATA:-}" && -d "$KB_PG_DATA" ]] || return 0
    if _kb_as_pg "$KB_PG_BINDIR/pg_ctl" -D "$KB_PG_DATA" status >/dev/null 2>&1; then
        _kb_as_pg "$KB_PG_BINDIR/pg_ctl" -D "$KB_PG_DATA" -m fast -w -t 60 stop >/dev/null \
            && _kb_log "Postgres stopped" \
            || _kb_log "pg_ctl stop failed (see $KB_PG_DATA/../postgres.log)"
    fi
    unset KB_PG_DATA KB_PG_PORT KB_TEST_POSTGRES_URL
}

# Launch Neo4j in the background (returns at once); kb_neo4j_wait waits for Bolt.
kb_neo4j_launch() {
    local port dir
    if [[ -n "${KB_NEO4J_PID:-}" ]] && kill -0 "$KB_NEO4J_PID" 2>/dev/null; then
        _kb_log "Neo4j already running (pid $KB_NEO4J_PID, $KB_TEST_NEO4J_URI)"
        return 0
    fi
    [[ -f "$KB_NEO4J_JARS/.pom.sha256" ]] || { _kb_log "Neo4j jars missing in $KB_NEO4J_JARS (run kb_neo4j_fetch)"; return 1; }
    command -v java >/dev/null 2>&1 || { _kb_log "java not found (a JDK 17 is needed)"; return 1; }
    _kb_services_dir || return 1
    dir="$KB_SERVICES_DIR/neo4j"
    mkdir -p "$dir" || return 1
    port="$(kb_free_port)" || return 1
    _kb_neo4j_java "$dir" "$port"
    _kb_log "Neo4j launching (pid $KB_NEO4J_PID, port $port, log $dir/launcher.log)"
}

# Start the launcher JVM on the store in $1/db, Bolt on 127.0.0.1:$2, in the background. Its
# pid also goes to $1/launcher.pid, so kb_neo4j_stop finds a launcher that kb_neo4j_resume
# started in another shell (a test's subprocess).
_kb_neo4j_java() {
    local dir="$1" port="$2"
    KB_NEO4J_STARTED="$(_kb_now)"
    # SIGTERM back to its default first: a JVM that starts with SIGTERM ignored keeps ignoring
    # it (no shutdown hook runs), and a caller may hand it ignored (a test's subprocess: pytest
    # under `make` in the background has SIGINT ignored, and Dagster's in-process runs copy
    # that onto SIGTERM); bash itself cannot undo an ignored signal, coreutils' env can.
    # shellcheck disable=SC2086 # KB_NEO4J_JAVA_OPTS is a list of JVM flags
    env --default-signal=TERM \
        java $KB_NEO4J_JAVA_OPTS -cp "$KB_NEO4J_JARS/*" "$KB_REPO_ROOT/.ci/neo4j/Launcher.java" \
        "$dir/db" "$port" >>"$dir/launcher.log" 2>&1 </dev/null &
    KB_NEO4J_PID=$!
    disown "$KB_NEO4J_PID" 2>/dev/null || true
    echo "$KB_NEO4J_PID" >"$dir/launcher.pid"
    export KB_NEO4J_PID KB_NEO4J_PORT="$port" KB_NEO4J_DIR="$dir" KB_NEO4J_STARTED
}

# The pid of the running launcher: $KB_NEO4J_DIR/launcher.pid (newest), else $KB_NEO4J_PID.
_kb_neo4j_pid() {
    local file="${KB_NEO4J_DIR:-}/launcher.pid"
    if [[ -n "${KB_NEO4J_DIR:-}" && -s "$file" ]]; then
        cat "$file"
    else
        echo "${KB_NEO4J_PID:-}"
    fi
}

# SIGTERM the launcher $1 and wait for it to exit (SIGKILL after 60 s).
_kb_neo4j_end() {
    local pid="$1" i
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 120; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.5
    done
    _kb_log "Neo4j (pid $pid) ignored SIGTERM for 60 s; killing it"
    kill -KILL "$pid" 2>/dev/null
    sleep 1
}

# Stop the running Neo4j but keep its store, port and variables, for kb_neo4j_resume (the
# outage tests).
kb_neo4j_pause() {
    local pid
    pid="$(_kb_neo4j_pid)"
    [[ -n "$pid" && -n "${KB_NEO4J_DIR:-}" ]] || { _kb_log "no Neo4j to pause (kb_neo4j_start)"; return 1; }
    _kb_neo4j_end "$pid"
    _kb_log "Neo4j paused (127.0.0.1:$KB_NEO4J_PORT refuses connections)"
}

# Relaunch the Neo4j kb_neo4j_pause stopped, on the same port and store; waits for Bolt.
kb_neo4j_resume() {
    local pid
    [[ -n "${KB_NEO4J_DIR:-}" && -n "${KB_NEO4J_PORT:-}" ]] || { _kb_log "no Neo4j to resume (kb_neo4j_start)"; return 1; }
    pid="$(_kb_neo4j_pid)"
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
        return 0
    fi
    _kb_neo4j_java "$KB_NEO4J_DIR" "$KB_NEO4J_PORT"
    unset KB_TEST_NEO4J_URI   # kb_neo4j_wait skips a URI it has already waited for
    kb_neo4j_wait || return 1
    _kb_log "Neo4j resumed (pid $KB_NEO4J_PID)"
}

# Wait until Bolt answers `verify_connectivity()`; export KB_TEST_NEO4J_URI.
kb_neo4j_wait() {
    local uri="bolt://127.0.0.1:$KB_NEO4J_PORT" version
    [[ -n "${KB_NEO4J_PID:-}" ]] || { _kb_log "Neo4j was not launched (kb_neo4j_launch)"; return 1; }
    [[ "${KB_TEST_NEO4J_URI:-}" == "$uri" ]] && return 0   # already waited for this one
    version="$(_kb_python - "$uri" "$KB_NEO4J_PID" "$KB_SERVICE_START_TIMEOUT" <<'PY'
import os, sys, time
import neo4j
from neo4j.exceptions import ServiceUnavailable

uri, pid, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + timeout
while True:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit("the Neo4j launcher exited before Bolt answered")
    try:
        with neo4j.GraphDatabase.driver(uri, auth=None) as driver:
            driver.verify_connectivity()
            records, _, _ = driver.execute_query("CALL dbms.components() YIELD versions, edition")
            print(f"{records[0]['versions'][0]} {records[0]['edition']}")
            break
    except ServiceUnavailable:
        if time.monotonic() > deadline:
            sys.exit(f"Neo4j at {uri} did not answer within {timeout:.0f} s")
        time.sleep(0.5)
PY
    )" || { _kb_log "Neo4j did not start:"; tail -30 "$KB_NEO4J_DIR/launcher.log" >&2; kb_neo4j_stop; return 1; }
    export KB_TEST_NEO4J_URI="$uri" KB_NEO4J_VERSION="$version"
    KB_NEO4J_START_SECONDS="$(_kb_elapsed "$KB_NEO4J_STARTED")"
    export KB_NEO4J_START_SECONDS
    _kb_log "Neo4j $version on $uri ready in ${KB_NEO4J_START_SECONDS}s (pid $KB_NEO4J_PID)"
}

kb_neo4j_start() { kb_neo4j_launch && kb_neo4j_wait; }

# SIGTERM the launcher (its shutdown hook closes the database), SIGKILL after 60 s.
kb_neo4j_stop() {
    local pid
    pid="$(_kb_neo4j_pid)"
    [[ -n "$pid" ]] || return 0
    if kill -0 "$pid" 2>/dev/null; then
        _kb_neo4j_end "$pid"
        _kb_log "Neo4j stopped"
    fi
    [[ -n "${KB_NEO4J_DIR:-}" ]] && rm -f "$KB_NEO4J_DIR/launcher.pid"
    unset KB_NEO4J_PID KB_NEO4J_PORT KB_TEST_NEO4J_URI
}

# Start both (Neo4j boots in the background while Postgres starts). Returns non-zero and
# stops whatever did start if either fails.
kb_services_start() {
    kb_neo4j_launch || return 1
    kb_postgres_start || { kb_neo4j_stop; return 1; }
    kb_neo4j_wait || { kb_postgres_stop; return 1; }
}

# Stop both and delete their data folder. Safe to call twice, and after a failed start.
kb_services_stop() {
    kb_neo4j_stop
    kb_postgres_stop
    if [[ -n "${KB_SERVICES_DIR:-}" && -d "$KB_SERVICES_DIR" && "$KB_SERVICES_DIR" == */kb-services.* ]]; then
        rm -rf "$KB_SERVICES_DIR"
    fi
    unset KB_SERVICES_DIR
}
