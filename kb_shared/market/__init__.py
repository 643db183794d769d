"""Structured market data kept beside the documents, synced on a schedule into the catalog:
the AER's retail performance statistics (``aer*.py``) and the Notion compliance tracker
(``notion.py``, ``notion_schema.py``). Reading and mapping live here; the tables and the
queries live in ``kb_shared.stores.catalog``.
"""
