"""BlobStore contract: the same suite on ``file://`` and on fsspec's ``memory://``, which
proves the store depends on nothing but the fsspec filesystem interface."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from kb_shared.stores.blobs import TEMP_PREFIX, BlobStore, check_key


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    if request.param == "file":
        return BlobStore((tmp_path / "blobs").as_uri())
    # fsspec's memory filesystem is one process-wide dict: give every test its own root.
    return BlobStore(f"memory://kb-test-{uuid.uuid4().hex}/blobs")


def test_put_get_roundtrip(store: BlobStore) -> None:
    store.put("pdfs/a.pdf", b"%PDF-1.7 body")
    assert store.get("pdfs/a.pdf") == b"%PDF-1.7 body"
    assert store.exists("pdfs/a.pdf")
    assert store.size("pdfs/a.pdf") == 13
    with store.open("pdfs/a.pdf") as handle:
        assert handle.read(4) == b"%PDF"


def test_empty_blob_is_stored(store: BlobStore) -> None:
    store.put("empty.bin", b"")
    assert store.exists("empty.bin")
    assert store.get("empty.bin") == b""
    assert store.size("empty.bin") == 0


def test_unicode_key(store: BlobStore) -> None:
    key = "pdfs/Règles d’été – 東京.pdf"
    store.put(key, "é".encode())
    assert store.get(key) == b"\xc3\xa9"
    assert store.list("pdfs") == [key]


def test_list_is_sorted_by_code_point(store: BlobStore) -> None:
    for key in ["b", "a/z", "é", "A", "a-b", "a/b"]:
        store.put(key, key.encode())
    assert store.list() == ["A", "a-b", "a/b", "a/z", "b", "é"]


def test_prefixes_are_folders(store: BlobStore) -> None:
    for key in ["figures/a/2.png", "figures/a/1.png", "figures/a/x/3.png", "figures/ab/1.png"]:
        store.put(key, b"png")
    store.put("pdfs/a.pdf", b"pdf")
    assert store.list("figures/a") == ["figures/a/1.png", "figures/a/2.png", "figures/a/x/3.png"]
    assert store.list("figures/a/") == store.list("figures/a")
    assert store.list("figures") == [
        "figures/a/1.png",
        "figures/a/2.png",
        "figures/a/x/3.png",
        "figures/ab/1.png",
    ]
    assert store.list("missing") == []
    assert store.list("pdfs/a.pdf") == []  # a key is not a folder


def test_overwrite_replaces_content(store: BlobStore) -> None:
    store.put("doc.md", b"first version")
    store.put("doc.md", b"two")
    assert store.get("doc.md") == b"two"
    assert store.size("doc.md") == 3
    assert store.list() == ["doc.md"]


def test_put_file_streams_a_local_file(store: BlobStore, tmp_path: Path) -> None:
    source = tmp_path / "big.pdf"
    payload = bytes(range(256)) * 12_289  # ~3 MiB: more than one 1 MiB copy block
    source.write_bytes(payload)
    store.put_file("pdfs/big.pdf", source)
    assert store.size("pdfs/big.pdf") == 3_145_984
    assert store.get("pdfs/big.pdf") == payload
    with pytest.raises(FileNotFoundError, match="no file at"):
        store.put_file("pdfs/none.pdf", tmp_path / "none.pdf")
    assert not store.exists("pdfs/none.pdf")


def test_missing_key_raises_file_not_found(store: BlobStore) -> None:
    with pytest.raises(FileNotFoundError, match="no blob 'pdfs/none.pdf'"):
        store.get("pdfs/none.pdf")
    with pytest.raises(FileNotFoundError, match="no blob 'pdfs/none.pdf'"):
        store.size("pdfs/none.pdf")
    with pytest.raises(FileNotFoundError, match="no blob 'pdfs/none.pdf'"):
        store.open("pdfs/none.pdf")
    assert store.exists("pdfs/none.pdf") is False


def test_a_folder_is_not_a_blob(store: BlobStore) -> None:
    store.put("figures/a/1.png", b"png")
    assert store.exists("figures/a") is False
    with pytest.raises(FileNotFoundError, match="no blob 'figures/a'"):
        store.get("figures/a")


def test_delete_and_delete_prefix(store: BlobStore) -> None:
    for key in ["figures/a/1.png", "figures/a/x/2.png", "figures/ab/1.png", "pdfs/a.pdf"]:
        store.put(key, b"data")
    assert store.delete("pdfs/a.pdf") is True
    assert store.delete("pdfs/a.pdf") is False  # missing is fine
    assert store.delete("never/was.pdf") is False
    assert store.delete_prefix("figures/a") == 2
    assert store.list() == ["figures/ab/1.png"]
    assert store.delete_prefix("figures/a") == 0
    with pytest.raises(ValueError, match="refusing to delete every blob"):
        store.delete_prefix("")
    assert store.list() == ["figures/ab/1.png"]


BAD_KEYS = [
    ("../escape.pdf", "segment"),
    ("pdfs/../../escape.pdf", "segment"),
    ("./a.pdf", "segment"),
    ("/etc/passwd", "relative"),
    ("pdfs\\..\\escape.pdf", "backslash"),
    ("a\x00b", "NUL"),
    ("", "empty"),
    ("pdfs//a.pdf", "segment"),
    ("pdfs/", "segment"),
    (f"pdfs/{TEMP_PREFIX}x", "reserved"),
    ("x" * 256, "longer than 255"),
]


@pytest.mark.parametrize(("key", "why"), BAD_KEYS)
def test_unsafe_keys_are_refused(store: BlobStore, key: str, why: str) -> None:
    for operation in (
        lambda: store.put(key, b"x"),
        lambda: store.get(key),
        lambda: store.exists(key),
        lambda: store.delete(key),
        lambda: store.url(key),
        lambda: store.local_path(key),
    ):
        with pytest.raises(ValueError, match=why):
            operation()
    assert store.list() == []


def test_traversal_writes_nothing_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "blobs"
    store = BlobStore(root.as_uri())
    for key in ("../escape.pdf", "a/../../escape.pdf", "/tmp/escape.pdf"):
        with pytest.raises(ValueError):
            store.put(key, b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # not even the root was created


def test_check_key_returns_a_good_key() -> None:
    assert check_key("figures/rule-3.1.pdf/figure-1.png") == "figures/rule-3.1.pdf/figure-1.png"
    assert check_key("", allow_empty=True) == ""


def test_url_and_local_path_on_file(tmp_path: Path) -> None:
    root = tmp_path / "blobs"
    store = BlobStore(root.as_uri())
    assert store.url("pdfs/a.pdf") == f"file://{root}/pdfs/a.pdf"
    assert store.local_path("pdfs/a.pdf") == root / "pdfs" / "a.pdf"
    assert store.is_local is True


def test_url_and_local_path_on_memory() -> None:
    store = BlobStore("memory://kb-url-test/blobs")
    assert store.url("pdfs/a.pdf") == "memory:///kb-url-test/blobs/pdfs/a.pdf"
    assert store.local_path("pdfs/a.pdf") is None
    assert store.is_local is False


def test_failed_local_put_keeps_the_old_blob_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = BlobStore((tmp_path / "blobs").as_uri())
    store.put("pdfs/a.pdf", b"old")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space left"):
        store.put("pdfs/a.pdf", b"new content")
    monkeypatch.undo()
    assert store.get("pdfs/a.pdf") == b"old"
    assert os.listdir(tmp_path / "blobs" / "pdfs") == ["a.pdf"]


def test_local_delete_prunes_empty_folders(tmp_path: Path) -> None:
    root = tmp_path / "blobs"
    store = BlobStore(root.as_uri())
    store.put("figures/a/x/1.png", b"png")
    store.put("figures/b/1.png", b"png")
    assert store.delete_prefix("figures/a") == 1
    assert not (root / "figures" / "a").exists()
    assert (root / "figures" / "b" / "1.png").is_file()
    assert store.delete("figures/b/1.png") is True
    assert sorted(os.listdir(root)) == []  # the root itself stays


def test_put_refuses_non_bytes(store: BlobStore) -> None:
    with pytest.raises(TypeError, match="blob data must be bytes, got str"):
        store.put("a.txt", "text")  # type: ignore[arg-type]
    assert store.list() == []
