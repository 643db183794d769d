-- documents.edition_of (issue 27, "What changed"): the doc_id of a document's previous edition
-- (a document with another name: next year's Notice to Market), or NULL. Documents so linked
-- form a series, one edition after another: at most one next edition each (unique index), and
-- never a document's own edition (CHECK). Loops and unknown documents are refused by the code
-- that writes the link (kb_shared/stores/catalog/documents.py check_edition_link); no foreign
-- key, as for document_versions: deleting a document unlinks its next edition in the same
-- transaction (the code does).
--
-- Idempotent, like every numbered file: `kb db init` applies it on every run. kb_reader's
-- table-wide SELECT (003) covers the new column.
ALTER TABLE documents ADD COLUMN IF NOT EXISTS edition_of varchar(120);

CREATE UNIQUE INDEX IF NOT EXISTS ux_documents_edition_of ON documents (edition_of);

DO $$
BEGIN
    IF NOT EXISTS (
        SELECT FROM pg_constraint
        WHERE conrelid = 'documents'::regclass AND conname = 'ck_documents_edition_of'
    ) THEN
        ALTER TABLE documents ADD CONSTRAINT ck_documents_edition_of
            CHECK (edition_of <> doc_id);
    END IF;
END
$$;
