"""Answering queries: the search pipeline and what it is built from.

* ``query`` — the query checked, embedded and analysed once (``AnalysedQuery``);
* ``retrieval`` — the pipeline of ``search_docs``, stage by stage (analyse, candidates and
  fusion, features and order, confidence, pages and quotes, answer);
* ``retrieval_features`` — a chunk's sentences and table rows, question-shaped signals;
* ``sparse`` — the keyword tokenizer; ``acronyms`` — abbreviation pairs from the graph;
* ``editions`` — "the corpus holds another edition" answers;
* ``graph_relevance`` — how well a relationship answers a question;
* ``citations`` — ``PointPayload`` and the numbered citation header; ``quotes`` — a result's
  quote and the page it is on;
* ``evaluation`` — eval-set questions, the hit rule, Recall@k and MRR.

The stores it reads are in ``kb_shared.stores``; the map is ``docs/architecture.md``.
"""
