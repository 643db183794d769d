"""kb_assets: the Dagster code location (``definitions``) and the ``kb`` command (``cli/``), the
only writer of the corpus. Per-document assets are in ``assets/``, market-data assets in
``market/``, the jobs in ``jobs``, intake in ``intake``, what the CLI does in ``operations``, the
upload page in ``upload/``. The map is ``docs/architecture.md``.
"""
