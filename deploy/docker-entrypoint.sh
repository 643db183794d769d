#!/bin/sh
# The kb image's roles (deploy/Dockerfile). Settings come from the environment (KB_*, the
# providers' own key names); see docs/deploy.md for which role needs which.
set -eu

role="${1:-mcp}"
if [ "$#" -gt 0 ]; then shift; fi

case "$role" in
    code-location)
        # Dagster's gRPC code server for kb_assets.definitions; with the default run launcher
        # runs start as processes of this container (so it holds the pipeline's settings).
        exec dagster code-server start --host 0.0.0.0 --port 4000 \
            --module-name kb_assets.definitions --attribute defs "$@"
        ;;
    webserver)
        exec dagster-webserver --host 0.0.0.0 --port 3000 \
            --workspace "$DAGSTER_HOME/workspace.yaml" "$@"
        ;;
    daemon)
        exec dagster-daemon run --workspace "$DAGSTER_HOME/workspace.yaml" "$@"
        ;;
    mcp)
        # KB_MCP_HOST/KB_MCP_PORT/KB_MCP_TOKENS say where and to whom it answers.
        exec kb-mcp serve "$@"
        ;;
    init)
        # Idempotent: the catalog/graph schema (and kb_reader's grants on Postgres), then the
        # Dagster instance with the KB_*_POOL_LIMIT settings written to it.
        kb db init
        exec python -m kb_assets.instance
        ;;
    *)
        exec "$role" "$@"
        ;;
esac
