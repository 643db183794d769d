#!/bin/sh
# Runs once, when the Postgres container initialises an empty data volume
# (/docker-entrypoint-initdb.d). POSTGRES_USER (kb) owns both databases:
#   kb       the catalog and SQL graph (`kb db init` creates the tables and kb_reader's grants)
#   dagster  Dagster's runs, event log and schedules (KB_DAGSTER_POSTGRES_URL)
# and kb_reader, the MCP server's login, gets its password from READER_DB_PASSWORD here;
# sql/003_reader_role.sql (run by `kb db init`) keeps the role and sets what it may do.
set -eu
psql --set ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    --set reader_password="$READER_DB_PASSWORD" <<'SQL'
CREATE DATABASE dagster;
CREATE ROLE kb_reader LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT PASSWORD :'reader_password';
SQL
