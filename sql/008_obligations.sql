-- The obligations register (issue 26): one row per obligation of one document version, filed
-- under the version's key (kb_shared.identity.version_key) and written whole by the
-- obligations asset. The code's table is kb_shared/stores/catalog/obligations.py (SQLite gets
-- it from the code). Idempotent, like every numbered file; kb_reader's default SELECT
-- privilege (003) covers the new table.
CREATE TABLE IF NOT EXISTS obligations (
    version_key varchar(140) NOT NULL,
    number      integer      NOT NULL,
    doc_id      varchar(120) NOT NULL,
    version     integer      NOT NULL,
    party       text         NOT NULL,
    role        varchar(100),
    modality    varchar(20)  NOT NULL,
    text        text         NOT NULL,
    action      text         NOT NULL,
    deadline    text,
    reference   varchar(100),
    page        integer,
    chunk_id    varchar(400) NOT NULL,
    heading     text         NOT NULL DEFAULT '',
    PRIMARY KEY (version_key, number),
    CONSTRAINT ck_obligations_number CHECK (number >= 1),
    CONSTRAINT ck_obligations_modality
        CHECK (modality IN ('must', 'must not', 'should', 'should not')),
    CONSTRAINT ck_obligations_page CHECK (page IS NULL OR page >= 1)
);
CREATE INDEX IF NOT EXISTS ix_obligations_doc_id ON obligations (doc_id);
