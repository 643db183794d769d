"""The ``markdown`` asset's stored output is two blobs, ``markdown/{doc}.md`` and its
``.json`` metadata (``StepRecords.save``). A write the blob store refuses halfway leaves the
document with its previous pair or none, never a text without its metadata or beside another
conversion's metadata. The failures are injected at the blob store (a real local store that
refuses chosen writes as a full disk does)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from kb_assets.constants import MARKDOWN
from kb_assets.io_manager import StepRecords
from kb_assets.outputs import MarkdownDocument
from kb_shared import layout
from kb_shared.errors import BlobStoreFullError
from kb_shared.providers.base import FigureRegion
from kb_shared.stores.blobs import BlobStore

DOC = "procedure.pdf"
TEXT_KEY = layout.markdown_key(DOC)
META_KEY = layout.markdown_meta_key(DOC)


class FullingStore(BlobStore):
    """A local ``BlobStore`` whose disk fills up at the write of ``fills_at``: that write and
    every later one (unless ``room_after`` says the refused write was the only one) fail with
    ``BlobStoreFullError``. Deletes still work, as they do on a full disk."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.fills_at: str | None = None
        self.room_after = False
        self.full = False
        self.refused: list[str] = []

    def put(self, key: str, data: bytes) -> None:
        if key == self.fills_at and not self.refused:
            self.full = True
        if self.full:
            self.refused.append(key)
            if self.room_after:
                self.full = False
            raise BlobStoreFullError(
                f"no room for {key!r}", root=self.root_url, key=key, size=len(data),
                errno=errno.ENOSPC,
            )
        super().put(key, data)


class UnreachableStore(FullingStore):
    """Full at ``fills_at``, and refusing every delete after that (the store went away)."""

    def delete(self, key: str) -> bool:
        if self.full:
            raise OSError(errno.EIO, f"cannot delete {key!r}")
        return super().delete(key)


def _document(text: str, title: str) -> MarkdownDocument:
    return MarkdownDocument(
        markdown=f"<!-- page 1 -->\n# {title}\n\n{text}\n",
        pages=1,
        title=title,
        version="1.0",
        converter="fake-converter 1",
        figures=(FigureRegion(page=1, bbox=(10.0, 20.0, 200.0, 300.0), caption="Figure 1"),),
        doc_id=DOC,
        name="Procedure.pdf",
        provider="fake-converter",
        sha256="ab" * 32,
        size_bytes=1234,
    )


@pytest.fixture
def store(tmp_path: Path) -> FullingStore:
    return FullingStore((tmp_path / "blobs").as_uri())


def _refused_save(store: BlobStore, document: MarkdownDocument) -> BlobStoreFullError:
    """Save ``document`` expecting the store to refuse a write; the error raised."""
    with pytest.raises(BlobStoreFullError) as raised:
        StepRecords(store).save(MARKDOWN, DOC, document)
    return raised.value


def _has_no_pair(store: BlobStore) -> bool:
    return (
        not store.exists(TEXT_KEY)
        and not store.exists(META_KEY)
        and StepRecords(store).previous_markdown(DOC) is None
    )


def test_a_pair_is_stored_and_read_back(store: FullingStore) -> None:
    document = _document("The Retailer must notify the Distributor.", "Old Title")
    StepRecords(store).save(MARKDOWN, DOC, document)
    assert StepRecords(store).load(MARKDOWN, DOC) == document
    assert StepRecords(store).previous_markdown(DOC) == document


def test_a_refused_metadata_write_of_a_first_conversion_leaves_nothing(
    store: FullingStore,
) -> None:
    store.fills_at = META_KEY
    _refused_save(store, _document("First text.", "Title"))
    assert store.refused == [META_KEY]
    assert _has_no_pair(store)


@pytest.mark.parametrize("refused", [TEXT_KEY, META_KEY])
def test_a_refused_write_keeps_the_previous_pair(store: FullingStore, refused: str) -> None:
    old = _document("The Retailer must notify the Distributor.", "Old Title")
    StepRecords(store).save(MARKDOWN, DOC, old)
    store.fills_at, store.room_after = refused, True  # room again once the write is refused
    _refused_save(store, _document("A new conversion.", "New Title"))
    assert store.refused == [refused]
    assert store.get(TEXT_KEY) == old.markdown.encode("utf-8")
    assert StepRecords(store).load(MARKDOWN, DOC) == old
    assert StepRecords(store).previous_markdown(DOC) == old


def test_no_room_to_put_the_previous_text_back_leaves_no_pair(store: FullingStore) -> None:
    StepRecords(store).save(MARKDOWN, DOC, _document("Old text.", "Old Title"))
    store.fills_at = META_KEY  # and the disk stays full
    error = _refused_save(store, _document("A new conversion.", "New Title"))
    assert store.refused == [META_KEY, TEXT_KEY]
    assert error.key == META_KEY  # the write's own error, not the undo's
    assert _has_no_pair(store)


def test_an_unchanged_pair_is_kept_when_its_rewrite_is_refused(store: FullingStore) -> None:
    document = _document("Reused text.", "Title")
    StepRecords(store).save(MARKDOWN, DOC, document)
    store.fills_at = META_KEY  # the disk stays full: nothing may need a write to survive
    _refused_save(store, document)  # a reused conversion, stored again
    assert store.refused == [META_KEY]
    assert StepRecords(store).previous_markdown(DOC) == document


def test_an_undo_the_store_refuses_is_named_on_the_error(tmp_path: Path) -> None:
    store = UnreachableStore((tmp_path / "blobs").as_uri())
    store.fills_at = META_KEY
    error = _refused_save(store, _document("First text.", "Title"))
    assert error.__notes__ == [
        f"{TEXT_KEY}, {META_KEY} may not match each other: undoing the write failed too "
        f"([Errno 5] cannot delete {TEXT_KEY!r}); `kb rebuild markdown` writes both again"
    ]
