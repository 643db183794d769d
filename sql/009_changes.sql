-- change_sets and document_changes (issue 27, "What changed"): what changed in each document
-- version against its previous issue (an earlier version of the same document, or the edition
-- it follows). One change_sets row per compared version, with the issue it was compared with,
-- the summary counts and when it was computed; one document_changes row per change, numbered
-- from 1, with the text and pages of both sides (pages and changed figures as JSON arrays).
-- The changes asset rewrites a version's rows in one transaction. The code's tables:
-- kb_shared/stores/catalog/changes.py. No foreign keys: deleting a document deletes its
-- comparisons, and those made against it, in the same transaction (the code does).
--
-- Idempotent, like every numbered file. kb_reader reads the new tables through 003's
-- default privileges (and 003's table-wide grant on its next run).
CREATE TABLE IF NOT EXISTS change_sets (
    doc_id              varchar(120) NOT NULL,
    version             integer      NOT NULL,
    previous_doc_id     varchar(120) NOT NULL,
    previous_version    integer      NOT NULL,
    added               integer      NOT NULL,
    removed             integer      NOT NULL,
    changed             integer      NOT NULL,
    moved               integer      NOT NULL,
    unchanged_sections  integer      NOT NULL,
    obligations_changed integer      NOT NULL,
    numbers_changed     integer      NOT NULL,
    computed_at         timestamptz  NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (doc_id, version),
    CONSTRAINT ck_change_sets_version CHECK (version >= 1),
    CONSTRAINT ck_change_sets_previous_version CHECK (previous_version >= 1),
    CONSTRAINT ck_change_sets_counts CHECK (
        added >= 0 AND removed >= 0 AND changed >= 0 AND moved >= 0
        AND unchanged_sections >= 0 AND obligations_changed >= 0 AND numbers_changed >= 0
    )
);

CREATE INDEX IF NOT EXISTS ix_change_sets_previous_doc_id ON change_sets (previous_doc_id);

CREATE TABLE IF NOT EXISTS document_changes (
    doc_id         varchar(120) NOT NULL,
    version        integer      NOT NULL,
    number         integer      NOT NULL,
    kind           varchar(16)  NOT NULL,
    section_before text,
    section_after  text,
    before_text    text         NOT NULL,
    before_pages   text         NOT NULL,
    after_text     text         NOT NULL,
    after_pages    text         NOT NULL,
    obligation     boolean      NOT NULL,
    numbers        text         NOT NULL,
    PRIMARY KEY (doc_id, version, number),
    CONSTRAINT ck_document_changes_number CHECK (number >= 1),
    CONSTRAINT ck_document_changes_kind
        CHECK (kind IN ('added', 'removed', 'changed', 'moved'))
);
