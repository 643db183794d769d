"""What a compliance reader asks of one document beside search: who must do what, and what
changed since its previous issue.

* ``obligations`` and ``obligation_sentences`` — the offline obligation detector (issue 26);
* ``changes`` and ``change_snapshots`` — a version's snapshot and the clause-level comparison
  of two issues (issue 27).

Their rows live in the catalog (``kb_shared.stores.catalog``); the map is
``docs/architecture.md``.
"""
