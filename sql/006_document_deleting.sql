-- documents.status 'deleting' (issue 16, "Crash and outage recovery"): `kb delete` first marks
-- the document 'deleting' in one committed write, so a delete killed half way leaves a row
-- nothing serves or builds, and the next `kb delete` (or `kb build`) finishes it. 001 made the
-- CHECK allow only 'pending', 'ready' and 'failed'; this widens it on a table made before.
--
-- Idempotent, like every numbered file: the constraint is replaced only while it lacks
-- 'deleting', so later runs of `kb db init` neither lock nor re-check the table. The same
-- CHECK as the code's (kb_shared/stores/catalog/documents.py STATUS_CHECK, which also widens
-- an older table itself on the first delete: ensure_deleting_status).
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT FROM pg_constraint
        WHERE conrelid = 'documents'::regclass
          AND conname = 'ck_documents_status'
          AND pg_get_constraintdef(oid) LIKE '%''deleting''%'
    ) THEN
        ALTER TABLE documents DROP CONSTRAINT IF EXISTS ck_documents_status;
        ALTER TABLE documents ADD CONSTRAINT ck_documents_status
            CHECK (status IN ('pending', 'ready', 'failed', 'deleting'));
    END IF;
END
$$;
