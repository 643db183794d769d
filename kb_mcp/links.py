"""The URLs citations point at, and the signatures that let a browser open them.

Links go to this server's read-only ``/files/{blob key}`` route (``kb_mcp.http``), so every
citation resolves. With bearer tokens configured, each link carries ``?sig=``, an HMAC of its
own blob key that ``/files`` accepts instead of the token (``kb_mcp.http.AccessMiddleware``).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from urllib.parse import quote

from kb_shared.access import bracket_host
from kb_shared.settings import Settings

#: The route stored files are served under.
FILES_ROUTE = "/files/"

#: Query parameter carrying a file link's signature.
SIGNATURE_PARAM = "sig"
#: Query parameter of a link that opens a superseded version's file on purpose: the "before"
#: side of what changed (issue 27); without it that file's link answers 410 (``kb_mcp.http``).
BEFORE_PARAM = "before"


def base_url(settings: Settings) -> str:
    """``settings.public_url`` or ``http://{mcp_host}:{mcp_port}`` (IPv6 hosts bracketed),
    without a trailing slash."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    return f"http://{bracket_host(settings.mcp_host)}:{settings.mcp_port}"


def signing_key(tokens: Sequence[str]) -> bytes | None:
    """The key file links are signed with: SHA-256 over the configured bearer tokens
    (sorted, NUL-separated), ``None`` when the server has no tokens (links need no
    signature then). Rotating the tokens invalidates every link handed out before."""
    if not tokens:
        return None
    return hashlib.sha256("\0".join(sorted(tokens)).encode("utf-8")).digest()


def file_signature(key: bytes, blob_key: str) -> str:
    """HMAC-SHA256 of one blob key, hex, first 32 characters (128 bits; RFC 2104 HMAC,
    truncation as RFC 2104 section 5 allows)."""
    return hmac.new(key, blob_key.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


#: What a page link signs (``page_signature``): one signature opens every page, not one file.
PAGES_SUBJECT = "pages:"
#: Cookie a signed page link sets, so the page's own requests (its script, style, JSON) pass.
PAGES_COOKIE = "kb_pages"


def page_signature(key: bytes) -> str:
    """The ``?sig=`` of the pages' links (``file_signature`` of ``PAGES_SUBJECT``): it opens
    the read-only pages (graph, galleries) in a browser when bearer tokens are set; rotating
    the tokens revokes it."""
    return file_signature(key, PAGES_SUBJECT)


def page_url(base: str, path: str, key: bytes | None) -> str:
    """``{base}{path}``, signed with ``page_signature`` when the server has a signing key."""
    url = f"{base.rstrip('/')}{path}"
    return f"{url}?{SIGNATURE_PARAM}={page_signature(key)}" if key is not None else url


class Links:
    """Builds the URLs citations point at: ``{base}/files/{percent-encoded blob key}``.

    With a signing key, each link carries ``?sig=`` (``file_signature`` of its own blob key): a
    signed link opens that one file and no other; it does not expire (a citation is meant to
    be shared), and rotating the tokens revokes it.
    """

    def __init__(self, base: str, key: bytes | None = None, *, route: str = FILES_ROUTE) -> None:
        self.base = base.rstrip("/")
        self.key = key
        self.route = route

    def file(self, key: str | None) -> str | None:
        """URL of a stored blob, ``None`` without a key."""
        if not key:
            return None
        url = self.base + self.route + quote(key, safe="/")
        if self.key is not None:
            url += f"?{SIGNATURE_PARAM}={file_signature(self.key, key)}"
        return url

    def page(self, key: str | None, page: int | None, *, before: bool = False) -> str | None:
        """URL of a stored PDF opened at ``page`` (``#page=N``, a PDF Open Parameters
        convention; no fragment when the page is unknown).

        Args:
            before: the link opens an earlier issue on purpose (``BEFORE_PARAM``): a
                superseded version's file is served, not its 410 page.
        """
        url = self.file(key)
        if url is None:
            return None
        if before:
            url += ("&" if "?" in url else "?") + f"{BEFORE_PARAM}=1"
        return url if page is None else f"{url}#page={page}"


def links_for(settings: Settings, *, stdio: bool = False) -> Links:
    """The citation links a server with these settings hands out.

    Over HTTP: ``{base_url}/files/{key}``, signed when bearer tokens are set. Over stdio
    there is no HTTP server to open them, so unless ``public_url`` names one, a local blob
    store (``file://``) gives ``file://`` links straight to the stored files — the stdio
    client runs on the same machine. Other blob stores keep the HTTP form.
    """
    if stdio and not settings.public_url:
        root = settings.resolved_blob_url
        if root.startswith("file://"):
            return Links(root, route="/")
    return Links(base_url(settings), signing_key(settings.token_list))
