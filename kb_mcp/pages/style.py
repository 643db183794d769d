"""The look the server's own HTML pages share (the figure gallery, the superseded-version page
of ``/files``): one stylesheet, inlined in each page's ``<style>`` so a page needs no second
request (a signed ``/files`` link opens that file alone, not a stylesheet beside it)."""

from __future__ import annotations

import base64
import hashlib

#: Type, width and colours of every page (the gallery adds its card grid to it).
BASE_STYLE = """
:root { color-scheme: light dark;
        font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
body { margin: 0 auto; padding: 16px 20px; max-width: 1200px; }
h1 { font-size: 20px; margin: 0 0 4px; }
.muted { color: #6b7385; }
"""

#: A page that states one thing (an error, a moved file): the base, a boxed notice whose
#: long links wrap instead of widening the page.
NOTICE_STYLE = BASE_STYLE + """
.notice { border: 1px solid #d5dae3; border-radius: 8px; padding: 10px 14px; margin: 12px 0; }
.notice a { overflow-wrap: anywhere; }
"""


def csp_hash(source: str) -> str:
    """``'sha256-…'``: the Content-Security-Policy source that allows exactly this inline
    ``<style>`` or ``<script>`` text (CSP level 2, "hash-source")."""
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"
