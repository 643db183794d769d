"""Loading the figure images a search_docs answer returns inline (the only blob reads of an
answer; ``kb_mcp.render`` then only formats).

Rules (mcp-utilities README, "Figures"): up to ``MAX_INLINE_IMAGES`` figures per response come
back as image content, the 1024 px inline copy, each under ``MAX_INLINE_IMAGE_BYTES``; a figure
that cannot be inlined keeps its links, so an image never fails a search.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kb_shared.search.retrieval import Passage
from kb_shared.stores.blobs import BlobStore

log = logging.getLogger(__name__)

#: At most this many figures per response come back as image content (mcp-utilities README,
#: MAX_INLINE_FIGURE_IMAGES = 4: base64 inflates ~1.33x and the transport buffers the whole
#: response).
MAX_INLINE_IMAGES = 4

#: Largest PNG returned inline, in bytes (mcp-utilities README, MAX_INLINE_FIGURE_BYTES,
#: "1.5 MB"); a larger one keeps its link and is not inlined.
MAX_INLINE_IMAGE_BYTES = 1_500_000

#: The 8-byte PNG signature (PNG specification, section 5.2).
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def figure_images(blobs: BlobStore, results: Sequence[Passage]) -> list[tuple[Passage, bytes]]:
    """The inline PNG of up to ``MAX_INLINE_IMAGES`` figure results, in result order.

    The 1024 px inline copy is used; a figure stored before inline copies existed falls back
    to its stored PNG. A figure whose PNG is missing, over ``MAX_INLINE_IMAGE_BYTES``, not a
    PNG, or unreadable is skipped (it keeps its links).
    """
    images: list[tuple[Passage, bytes]] = []
    for passage in results:
        if len(images) >= MAX_INLINE_IMAGES:
            break
        figure = passage.payload.figure
        if not passage.is_figure or figure is None:
            continue
        for key in (figure.inline_key, figure.stored_key):
            if not key:
                continue
            try:
                if blobs.size(key) > MAX_INLINE_IMAGE_BYTES:
                    continue
                data = blobs.get(key)
            except (OSError, ValueError) as exc:
                log.info("figure %s: %s not inlined: %s", passage.point.id, key, exc)
                continue
            if data.startswith(PNG_SIGNATURE) and len(data) <= MAX_INLINE_IMAGE_BYTES:
                images.append((passage, data))
                break
    return images
