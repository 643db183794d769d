-- kb knowledge graph in SQL (Postgres): the embedded graph store's two tables. Idempotent:
-- safe to run on every `kb db init`.
--
-- Used when KB_NEO4J_URI is unset (the graph then lives in the catalog database). The same
-- tables, columns, defaults, keys and indexes as kb_shared/stores/graph_sql.py
-- (GRAPH_METADATA); tests/stores/test_graph_contract.py creates one schema from this file and
-- one from the code and checks that Postgres reports the same for both.
--
-- Run after 001 as the role that owns the kb tables, e.g.
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f sql/002_graph.sql
-- or let `kb db init` apply every numbered file in order.

-- Entities, shared by every document. key = entity_key(name): NFC, case-folded, inner
-- whitespace collapsed, trimmed. vector = the name's embedding as little-endian float32
-- bytes (dimension values), used for similarity seeding; NULL when not embedded.
CREATE TABLE IF NOT EXISTS graph_entities (
    key         text    NOT NULL,
    name        text    NOT NULL,
    type        text    NOT NULL,
    description text    NOT NULL DEFAULT '',
    vector      bytea,
    dimension   integer,
    PRIMARY KEY (key)
);

-- Relationships, each owned by one document (source_doc = doc_id) and one chunk
-- (chunk_id, resolvable in the vector index). id = first 16 hex characters of the SHA-256
-- of the six fields (kb_shared.graph_model.Relationship.id).
CREATE TABLE IF NOT EXISTS graph_relationships (
    id          text NOT NULL,
    source_key  text NOT NULL,
    target_key  text NOT NULL,
    type        text NOT NULL,
    description text NOT NULL DEFAULT '',
    source_doc  text NOT NULL,
    chunk_id    text NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT fk_graph_relationships_source_key
        FOREIGN KEY (source_key) REFERENCES graph_entities (key),
    CONSTRAINT fk_graph_relationships_target_key
        FOREIGN KEY (target_key) REFERENCES graph_entities (key)
);

-- Replacing or deleting a document starts from source_doc; walks and degree counts from
-- either endpoint.
CREATE INDEX IF NOT EXISTS ix_graph_relationships_source_doc ON graph_relationships (source_doc);
CREATE INDEX IF NOT EXISTS ix_graph_relationships_source_key ON graph_relationships (source_key);
CREATE INDEX IF NOT EXISTS ix_graph_relationships_target_key ON graph_relationships (target_key);
