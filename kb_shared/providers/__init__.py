"""The models kb calls, one role each (``base``: Markdown conversion, embeddings, rerank, graph
extraction, figure location, contextual prefixes), each with a local offline implementation (``local_*``)
and a cloud one (``cloud_*``, every call through ``cloud_calls``) chosen by ``factory`` from the
settings: a cloud provider only when its key is set.
"""
