-- document_versions (issue 12, "New versions of a document"): every version of every
-- document, its own file (sha256, size, blob key), the version label read from the document,
-- when it was added and superseded, and its status: 'pending' (added, not built), 'serving'
-- (what search returns; at most one per document), 'superseded' (replaced by a later
-- version; its stored data is gone, the row stays as history) or 'failed' (with the reason;
-- the version served before it still is). At most one version per document is pending.
-- Rules and the switch: kb_shared/stores/catalog/versions.py. No foreign key to documents:
-- deleting a document deletes its versions in the same transaction (the code does).
--
-- Idempotent, like every numbered file. Existing documents become version 1: each document
-- without a version row gets one from its own row ('ready' -> 'serving'). kb_reader reads the
-- new table through 003's default privileges (and 003's table-wide grant on its next run).
CREATE TABLE IF NOT EXISTS document_versions (
    doc_id         varchar(120)  NOT NULL,
    version        integer       NOT NULL,
    name           varchar(1024) NOT NULL,
    sha256         varchar(64)   NOT NULL,
    size_bytes     bigint        NOT NULL,
    blob_key       text          NOT NULL,
    label          text,
    status         varchar(16)   NOT NULL DEFAULT 'pending',
    failure_reason text,
    added_at       timestamptz   NOT NULL DEFAULT CURRENT_TIMESTAMP,
    superseded_at  timestamptz,
    PRIMARY KEY (doc_id, version),
    CONSTRAINT uq_document_versions_sha256 UNIQUE (sha256),
    CONSTRAINT ck_document_versions_version CHECK (version >= 1),
    CONSTRAINT ck_document_versions_status
        CHECK (status IN ('pending', 'serving', 'superseded', 'failed')),
    CONSTRAINT ck_document_versions_failure_reason
        CHECK ((status = 'failed') = (failure_reason IS NOT NULL)),
    CONSTRAINT ck_document_versions_superseded_at
        CHECK (status <> 'superseded' OR superseded_at IS NOT NULL),
    CONSTRAINT ck_document_versions_sha256 CHECK (length(sha256) = 64),
    CONSTRAINT ck_document_versions_size_bytes CHECK (size_bytes >= 0)
);

CREATE UNIQUE INDEX IF NOT EXISTS ux_document_versions_pending
    ON document_versions (doc_id) WHERE status = 'pending';

CREATE UNIQUE INDEX IF NOT EXISTS ux_document_versions_serving
    ON document_versions (doc_id) WHERE status = 'serving';

INSERT INTO document_versions
    (doc_id, version, name, sha256, size_bytes, blob_key, label, status, failure_reason,
     added_at)
SELECT d.doc_id, 1, d.name, d.sha256, COALESCE(d.size_bytes, 0), d.blob_key, d.version,
       CASE d.status WHEN 'ready' THEN 'serving' ELSE d.status END,
       CASE d.status WHEN 'failed' THEN d.failure_reason END,
       d.created_at
FROM documents d
WHERE NOT EXISTS (SELECT FROM document_versions v WHERE v.doc_id = d.doc_id)
ON CONFLICT DO NOTHING;
