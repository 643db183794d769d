-- documents.category (issue 12, "Categories from folders"): the folder path a document was
-- added from below the folder given to `kb add` (e.g. 'aemo/procedures'), or NULL.
-- 001 creates it in a new database; this adds it to a documents table created before it.
-- Idempotent, like every numbered file: `kb db init` applies it on every run. kb_reader's
-- table-wide SELECT (003) covers the new column.
ALTER TABLE documents ADD COLUMN IF NOT EXISTS category varchar(200);
