"""The upload page ``kb ui`` and ``kb demo`` serve beside the Dagster UI (issue 13, "The upload
page"): drop documents, see each one's name and size checked before transfer, its upload
progress and then its build step by step; the corpus list and the request queue.

Modules: ``checks`` (the check before transfer), ``builds`` (runs and steps read from the
Dagster instance), ``work`` (the background worker), ``service`` (what the page does),
``app`` (the Starlette app and its access rules), ``__main__`` (the server process).
Package data: ``static/index.html``, ``static/upload.js``, ``static/upload.css``.
"""
