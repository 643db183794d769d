-- aer_performance.block (issue 25, "Exact market figures"): the column-A cells of the
-- jurisdiction block a figure's row is in ("A11:A14", from the block's first row to its
-- '<Region> Total' row), so an answer shows which block of which sheet its row came from.
-- Rows synced before it read '' until the next sync rewrites them. The code's column is
-- kb_shared/stores/catalog/aer.py (SQLite gains it on open: sql.add_missing_columns).
-- Idempotent, like every numbered file; kb_reader's table-wide SELECT (003) covers it.
ALTER TABLE aer_performance ADD COLUMN IF NOT EXISTS block varchar(32) NOT NULL DEFAULT '';
