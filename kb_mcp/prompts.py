"""The ``research-topic`` prompt: research a topic with both search tools and write one cited
answer. No ``from __future__ import annotations`` here (see ``kb_mcp.tools``)."""

from typing import Annotated

from pydantic import Field

from kb_mcp.tools import KbServer

#: Longest topic the prompt accepts (argument ``maxLength``).
MAX_TOPIC_CHARS = 500

RESEARCH_TOPIC = """\
Research {topic!r} in the kb knowledge base and write one cited answer.

1. Call search_docs with a focused query about the topic (add codes or clause numbers if the
   topic has them). Read the numbered results; call read_doc for neighbouring chunks when a
   passage is cut off.
2. Call search_graph with the same topic (hops=1; hops=2 if the first walk is thin) to find
   the parties, obligations and defined terms involved and how they connect.
3. Reconcile the two: build the answer from the passages, use the relationships to connect
   them, and cite every claim with its [n] header and page numbers (graph claims through their
   supporting excerpt).
4. Flag disagreement explicitly: where the graph's relationships and the passages say
   different things, or two documents disagree, say so and cite both sides instead of
   picking one silently.
5. If both tools come back empty or low confidence, say the indexed documents do not cover
   the topic, call list_documents to check, and do not answer from general knowledge as if
   it came from the corpus.
"""


def register(server: KbServer) -> None:
    """Register the ``research-topic`` prompt on ``server``."""

    @server.prompt(
        name="research-topic",
        title="Research a topic",
        description=(
            "Research a topic with both search_docs and search_graph, reconcile them into one "
            "cited answer, and flag where they disagree."
        ),
    )
    def research_topic(
        topic: Annotated[
            str,
            Field(min_length=1, max_length=MAX_TOPIC_CHARS, description="The topic or question."),
        ],
    ) -> str:
        return RESEARCH_TOPIC.format(topic=topic.strip())
