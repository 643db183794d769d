"""The rules of the offline graph extractor (``kb_shared.providers.local_graph``).

``text`` turns chunk Markdown into units, ``names`` / ``mentions`` / ``abbreviations`` find
and normalise entity names, ``phrases`` names a noun phrase no pattern covers, and ``rules``
reads relationships from spaCy's parse. Only
``local_graph`` imports this package; the vocabulary both extractors share is
``kb_shared.providers.graph_vocabulary``.
"""
