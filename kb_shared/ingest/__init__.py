"""Reading documents: what the pipeline's assets use to turn a PDF into located chunks.

* ``pdf`` — opening a PDF, refusing a bad one, its title, version label and page labels;
* ``chunking`` — chunk boundaries and ids (the single source of truth for chunk identity);
* ``page_location`` — a chunk's words found in the PDF text layer (``page_runs``, ``page_at``);
* ``figures`` — figure geometry and rendering (no model);
* ``contextual`` — what is embedded for a chunk (title and heading path before its text).

Converters and models are in ``kb_shared.providers``; the map is ``docs/architecture.md``.
"""
