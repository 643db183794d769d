-- kb_reader: the role the MCP server connects as (KB_READER_DATABASE_URL). Idempotent.
--
-- What it may do, and nothing else:
--   * SELECT every table in the current schema (catalog, SQL graph, anything added later by
--     the role that runs this file, through default privileges);
--   * INSERT into the two intake queues, and only their content columns, so a request
--     always starts with the server defaults status = 'pending', created_at = now and a
--     generated id (a leaked reader credential cannot queue an 'approved' request);
--   * UPDATE document_requests.request_count only: asking again for a pending title counts
--     one more ask on that request instead of adding a row.
-- Every run first revokes what kb_reader holds on the schema's tables and sequences, then
-- grants the list above, so re-running also removes privileges granted by hand.
--
-- Run after 001 (and 002) as the role that owns the kb tables and may create roles
-- (CREATEROLE), e.g. `kb db init`, or
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f sql/003_reader_role.sql
--
-- The password is never in this file. Set it once, separately, as that same role:
--   psql "$DATABASE_URL" -c '\password kb_reader'      (prompts; sends only a SCRAM hash)
-- or  ALTER ROLE kb_reader PASSWORD '<secret>';
-- then point the server at it:
--   KB_READER_DATABASE_URL=postgresql+psycopg://kb_reader:<secret>@host:5432/<database>
--
-- Postgres 14 and older let every role CREATE in schema public (15 revoked that; see
-- CVE-2018-1058). On those versions also run, as the schema owner:
--   REVOKE CREATE ON SCHEMA public FROM PUBLIC;
-- It is not done here because it changes what every other role of the database may do.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'kb_reader') THEN
        CREATE ROLE kb_reader LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
    END IF;
END
$$;

DO $$
DECLARE
    target_schema text := current_schema();
BEGIN
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO kb_reader', current_database());
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO kb_reader', target_schema);

    -- Start from nothing (revoking a table privilege also revokes it on every column).
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM kb_reader', target_schema);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM kb_reader', target_schema);

    -- Read everything, now and for tables this role creates later.
    EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO kb_reader', target_schema);
    EXECUTE format(
        'ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT ON TABLES TO kb_reader',
        target_schema);

    -- The two intake queues: content columns only.
    EXECUTE format(
        'GRANT INSERT (title, title_key, reason, source_url, checked_indexed_documents) '
        'ON TABLE %I.document_requests TO kb_reader', target_schema);
    EXECUTE format(
        'GRANT INSERT (url, title, description) ON TABLE %I.reference_requests TO kb_reader',
        target_schema);
    EXECUTE format(
        'GRANT UPDATE (request_count) ON TABLE %I.document_requests TO kb_reader',
        target_schema);

    -- Their id sequences (identity columns), for nextval() on insert.
    EXECUTE format('GRANT USAGE ON SEQUENCE %s TO kb_reader',
        pg_get_serial_sequence(format('%I.document_requests', target_schema), 'id'));
    EXECUTE format('GRANT USAGE ON SEQUENCE %s TO kb_reader',
        pg_get_serial_sequence(format('%I.reference_requests', target_schema), 'id'));
END
$$;
