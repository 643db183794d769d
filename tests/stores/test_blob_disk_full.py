"""A blob store without room (issue 16, "Crash and outage recovery"): a write the filesystem
refuses (``ENOSPC``, ``EDQUOT``, ``EFBIG``) raises ``BlobStoreFullError`` naming the store, the
key, the size and what to do, and leaves nothing under the key; ``remove_stale_temps`` deletes
the ``.kb-tmp-*`` files of a killed writer and nothing else.

The limits are real where the machine allows it without root: a file size limit
(``RLIMIT_FSIZE`` in a child process, ``EFBIG``) and a 64 KiB tmpfs mounted in a user and
mount namespace of its own (``unshare -Urm``, ``ENOSPC``). The cases a real filesystem cannot
be made to produce on demand (an error at ``fsync`` when a blob is replaced, an fsspec backend
that keeps a partial object) are injected at the filesystem edge: ``os.fsync`` and fsspec's
``MemoryFile.write`` / ``MemoryFileSystem.pipe_file``.
"""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from fsspec.implementations.memory import MemoryFile, MemoryFileSystem

from kb_assets import operations
from kb_assets.resources import StoresResource
from kb_shared.errors import BlobStoreFullError, StoreError
from kb_shared.stores import blobs as blobs_module
from kb_shared.stores.blobs import STALE_TEMP_SECONDS, TEMP_PREFIX, BlobStore

REPO = Path(__file__).resolve().parents[2]


def full_message(url: str, key: str, size: str, failure: str, where: str) -> str:
    """``BlobStoreFullError``'s message, written out."""
    return (
        f"the blob store {url} has no room: writing {key!r} ({size} bytes) failed with "
        f"{failure}; nothing was stored under that key. Free space on {where} or point "
        "KB_BLOB_URL at a store with room, then run `kb build`"
    )


def files_under(root: Path) -> list[str]:
    """Every file below ``root`` (temp files included), relative, sorted."""
    return sorted(
        str((Path(folder) / name).relative_to(root))
        for folder, _, names in os.walk(root)
        for name in names
    )


# -- a real file size limit (EFBIG) ------------------------------------------------------------

#: Child process: open ``argv[1]`` as a blob store, cap file sizes at ``argv[2]`` bytes
#: (SIGXFSZ ignored, so a write past the cap fails with EFBIG instead of killing the process),
#: write 3x the cap with ``put`` (``argv[3] == "put"``) or the file ``argv[4]`` with
#: ``put_file``; print the error's class, message, key, size and errno as JSON.
FSIZE_WRITER = """
import json, resource, signal, sys
from kb_shared.errors import BlobStoreFullError
from kb_shared.stores.blobs import BlobStore

store = BlobStore(sys.argv[1])
limit = int(sys.argv[2])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    if sys.argv[3] == "put":
        store.put("markdown/doc.md", b"x" * (3 * limit))
    else:
        store.put_file("pdfs/doc.pdf", sys.argv[4])
except BlobStoreFullError as exc:
    print(json.dumps([type(exc).__name__, str(exc), exc.key, exc.size, exc.errno]))
"""


@pytest.mark.parametrize(
    ("how", "key"), [("put", "markdown/doc.md"), ("put_file", "pdfs/doc.pdf")]
)
def test_a_write_past_the_file_size_limit_stores_nothing(
    how: str, key: str, tmp_path: Path
) -> None:
    root = tmp_path / "blobs"
    source = tmp_path / "doc.pdf"
    source.write_bytes(b"%PDF-1.7 " + b"y" * 12_279)  # 12,288 bytes, 3x the cap
    done = subprocess.run(
        [sys.executable, "-c", FSIZE_WRITER, root.as_uri(), "4096", how, str(source)],
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    name, message, failed_key, size, code = json.loads(done.stdout)
    assert (name, failed_key, size, code) == ("BlobStoreFullError", key, 12_288, errno.EFBIG)
    assert message == full_message(
        root.as_uri(), key, "12,288", "File too large (EFBIG)", str(root)
    )
    assert files_under(root) == []  # the 4,096-byte temp file is gone too
    assert BlobStore(root.as_uri()).list() == []


# -- a real full filesystem (ENOSPC): a 64 KiB tmpfs in a namespace of its own -----------------

#: Child process inside ``unshare -Urm`` with a 64 KiB tmpfs on ``argv[1]``: store 40 KiB,
#: then 40 KiB more (no room), then delete the first and store the second again; print what
#: each step saw as JSON.
TMPFS_WRITER = """
import json, os, sys
from kb_shared.errors import BlobStoreFullError
from kb_shared.stores.blobs import BlobStore

root = sys.argv[1]
store = BlobStore(root)
seen = {}
store.put("figures/a/figure-1.png", b"a" * 40_960)
try:
    store.put("figures/a/figure-2.png", b"b" * 40_960)
except BlobStoreFullError as exc:
    seen["error"] = [str(exc), exc.errno]
seen["files_when_full"] = sorted(
    os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root) for n in names
)
store.delete("figures/a/figure-1.png")
store.put("figures/a/figure-2.png", b"b" * 40_960)
seen["after_freeing"] = [store.list(), store.get("figures/a/figure-2.png") == b"b" * 40_960]
print(json.dumps(seen))
"""


def namespaces_work() -> bool:
    """Whether this machine lets an unprivileged process mount in its own namespaces."""
    if shutil.which("unshare") is None:
        return False
    try:
        done = subprocess.run(["unshare", "-Urm", "true"], capture_output=True, timeout=30)
    except OSError:
        return False
    return done.returncode == 0


@pytest.mark.skipif(not namespaces_work(), reason="needs `unshare -Urm` (user namespaces)")
def test_a_full_filesystem_stores_nothing_and_the_same_write_works_once_space_is_freed(
    tmp_path: Path,
) -> None:
    root = tmp_path / "blobs"
    root.mkdir()
    command = (
        'mount -t tmpfs -o size=64k kb-test "$1" && exec "$2" -c "$3" "$1"'
    )
    done = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", command, "sh", str(root), sys.executable, TMPFS_WRITER],
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["error"] == [
        full_message(
            str(root), "figures/a/figure-2.png", "40,960",
            "No space left on device (ENOSPC)", str(root),
        ),
        errno.ENOSPC,
    ]
    assert seen["files_when_full"] == ["figures/a/figure-1.png"]  # no .kb-tmp-* left
    assert seen["after_freeing"] == [["figures/a/figure-2.png"], True]


# -- injected at the filesystem edge ------------------------------------------------------------


def test_a_replacement_refused_at_fsync_keeps_the_previous_blob(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Filesystems that allocate late (ext4, XFS, NFS) report ENOSPC when the data is flushed."""
    store = BlobStore((tmp_path / "blobs").as_uri())
    store.put("chunks/doc.parquet", b"old parquet")

    def no_room(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(blobs_module.os, "fsync", no_room)
    with pytest.raises(BlobStoreFullError) as raised:
        store.put("chunks/doc.parquet", b"new parquet, longer")
    assert str(raised.value) == full_message(
        store.root_url, "chunks/doc.parquet", "19", "No space left on device (ENOSPC)",
        str(tmp_path / "blobs"),
    )
    assert isinstance(raised.value, StoreError) and isinstance(raised.value, OSError)
    assert (raised.value.root, raised.value.key, raised.value.size) == (
        store.root_url, "chunks/doc.parquet", 19
    )
    monkeypatch.undo()
    assert store.get("chunks/doc.parquet") == b"old parquet"
    assert files_under(tmp_path / "blobs") == ["chunks/doc.parquet"]


def test_another_os_error_is_not_called_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = BlobStore((tmp_path / "blobs").as_uri())

    def refused(fd: int) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(blobs_module.os, "fsync", refused)
    with pytest.raises(PermissionError):
        store.put("pdfs/a.pdf", b"%PDF")
    monkeypatch.undo()
    assert files_under(tmp_path / "blobs") == []


@pytest.fixture
def memory_store() -> Iterator[BlobStore]:
    """A ``memory://`` store with a root of its own (fsspec's memory filesystem is global)."""
    store = BlobStore(f"memory://kb-full-{uuid.uuid4().hex}/blobs")
    yield store
    for key in store.list():
        store.delete(key)


def test_put_file_on_fsspec_leaves_no_partial_object(
    memory_store: BlobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fsspec's ``put_file`` writes through an open file that commits what it holds, so a
    write refused half way would leave the first part visible under the key."""
    source = tmp_path / "big.pdf"
    source.write_bytes(b"p" * 5_000)
    room = {"left": 1_000}

    def write_until_full(self: MemoryFile, data: bytes) -> int:
        taken = bytes(data[: room["left"]])
        room["left"] -= len(taken)
        io.BytesIO.write(self, taken)
        if len(taken) < len(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return len(taken)

    monkeypatch.setattr(MemoryFile, "write", write_until_full)
    with pytest.raises(BlobStoreFullError) as raised:
        memory_store.put_file("pdfs/big.pdf", source)
    monkeypatch.undo()
    assert str(raised.value) == full_message(
        memory_store.root_url, "pdfs/big.pdf", "5,000", "No space left on device (ENOSPC)",
        memory_store.root_url,
    )
    assert not memory_store.exists("pdfs/big.pdf")
    assert memory_store.list() == []


def test_put_on_fsspec_over_quota_leaves_no_partial_object(
    memory_store: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_store.put("markdown/kept.md", b"another blob stays")
    original = MemoryFileSystem.pipe_file

    def over_quota(self: MemoryFileSystem, path: str, value: bytes, **kwargs: object) -> None:
        original(self, path, value[:10])  # the backend kept what it had received
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))

    monkeypatch.setattr(MemoryFileSystem, "pipe_file", over_quota)
    with pytest.raises(BlobStoreFullError) as raised:
        memory_store.put("markdown/doc.md", b"# Title\n\nbody text")
    monkeypatch.undo()
    assert raised.value.errno == errno.EDQUOT
    assert "failed with Disk quota exceeded (EDQUOT)" in str(raised.value)
    assert memory_store.list() == ["markdown/kept.md"]


def test_a_full_disk_wrapped_by_the_backend_is_recognised(
    memory_store: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def wrapped(self: MemoryFileSystem, path: str, value: bytes, **kwargs: object) -> None:
        try:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError as cause:
            raise OSError("upload of part 1 failed") from cause

    monkeypatch.setattr(MemoryFileSystem, "pipe_file", wrapped)
    with pytest.raises(BlobStoreFullError) as raised:
        memory_store.put("a.bin", b"x")
    assert raised.value.errno == errno.ENOSPC


# -- .kb-tmp-* leftovers ------------------------------------------------------------------------


def leave_temp(folder: Path, age_seconds: float, name: str = "abc123") -> Path:
    """A temp file as a killed ``put`` leaves it, last written ``age_seconds`` ago."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{TEMP_PREFIX}{name}"
    path.write_bytes(b"half a png")
    stamp = time.time() - age_seconds
    os.utime(path, (stamp, stamp))
    return path


def test_remove_stale_temps_deletes_only_old_temp_files(tmp_path: Path) -> None:
    root = tmp_path / "blobs"
    store = BlobStore(root.as_uri())
    store.put("figures/doc/figure-1.png", b"png")
    leave_temp(root / "figures" / "doc", 2 * STALE_TEMP_SECONDS, "old")
    leave_temp(root / "figures" / "gone", 2 * STALE_TEMP_SECONDS)  # its folder holds only it
    live = leave_temp(root / "markdown", 5)  # a concurrent writer's

    assert store.remove_stale_temps() == 2
    assert files_under(root) == ["figures/doc/figure-1.png", f"markdown/{live.name}"]
    assert not (root / "figures" / "gone").exists()  # the folder it left empty went too
    assert store.remove_stale_temps(older_than_seconds=0) == 1
    assert files_under(root) == ["figures/doc/figure-1.png"]
    assert store.remove_stale_temps() == 0


def test_remove_stale_temps_refuses_a_negative_age_and_has_nothing_to_do_off_disk(
    tmp_path: Path, memory_store: BlobStore
) -> None:
    with pytest.raises(ValueError, match="older_than_seconds must be >= 0, got -1"):
        BlobStore(tmp_path.as_uri()).remove_stale_temps(-1)
    memory_store.put("a.bin", b"x")
    assert memory_store.remove_stale_temps(0) == 0
    assert memory_store.list() == ["a.bin"]
    assert BlobStore((tmp_path / "never-written").as_uri()).remove_stale_temps() == 0


def test_recover_interrupted_removes_the_temp_files_of_a_killed_build(tmp_path: Path) -> None:
    stores = StoresResource(home=str(tmp_path / "kb"))
    try:
        root = stores.blobs().local_path("probe").parent
        stale = leave_temp(root / "figures" / "doc", 2 * STALE_TEMP_SECONDS)
        live = leave_temp(root / "markdown", 1)
        with dg.instance_for_test() as instance:
            assert operations.recover_interrupted(stores, instance) == []
        assert not stale.exists()
        assert live.exists()
    finally:
        stores.close()
