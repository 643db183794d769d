"""Blob store role: PDFs, Markdown and figure PNGs under one fsspec URL.

``BlobStore("file:///…/.kb/blobs")`` is the embedded default; any fsspec URL works the same
(``s3://bucket/kb``, ``gs://…``, ``memory://…`` in tests), because every operation goes
through the filesystem object ``fsspec.core.url_to_fs`` returns.

Keys are relative, ``/``-separated paths such as ``pdfs/rule-3.1.pdf`` or
``figures/rule-3.1.pdf/figure-1.png``. ``check_key`` refuses anything that could escape the
root (absolute paths, ``..``, backslashes, NUL), which is what stops path traversal when a
key is built from a name someone else chose.

Missing keys raise ``FileNotFoundError`` on every backend (the builtin exception fsspec
itself uses), with the key in the message. A write the filesystem refuses for lack of room
(``ENOSPC``, ``EDQUOT``, ``EFBIG``) raises ``BlobStoreFullError`` and leaves no partial blob
under the key (issue 16, "Crash and outage recovery").
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import fsspec.core
from fsspec.implementations.local import LocalFileSystem

from kb_shared.errors import BlobStoreFullError

#: Longest key segment in UTF-8 bytes: POSIX ``NAME_MAX`` on common local filesystems (ext4,
#: APFS, NTFS all cap a file name at 255), applied on every backend so a key that works on S3
#: also works on disk.
MAX_SEGMENT_BYTES = 255

#: Segment prefix of in-flight temporary files (``put`` on ``file://``); keys may not use it
#: and ``list`` never returns such files.
TEMP_PREFIX = ".kb-tmp-"

#: Seconds after its last write a ``TEMP_PREFIX`` file counts as left by a dead writer
#: (``remove_stale_temps``): a live ``put`` writes its temp file without pause, so an hour
#: untouched is far past any write kb makes.
STALE_TEMP_SECONDS = 3600.0

#: ``errno`` values that mean "no room for these bytes" (POSIX ``<errno.h>``): the device is
#: full (``ENOSPC``), the user's quota is (``EDQUOT``), or the file passes a size limit such as
#: ``RLIMIT_FSIZE`` (``EFBIG``).
FULL_ERRNOS = frozenset(
    code for code in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EFBIG) if code
)

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_key(key: str, *, allow_empty: bool = False) -> str:
    """Return ``key`` if it is a safe relative blob key, else raise ``ValueError``.

    Rules: a non-empty ``str``; no leading ``/``; no backslash; no NUL or other control
    character; no empty, ``.`` or ``..`` segment (so no ``//`` and no trailing ``/``); no
    segment longer than ``MAX_SEGMENT_BYTES`` UTF-8 bytes or starting with ``TEMP_PREFIX``.

    Args:
        key: the candidate key.
        allow_empty: accept ``""`` (the root, for ``list`` and ``delete_prefix``).

    Raises:
        ValueError: the key breaks a rule; the message says which.
    """
    if not isinstance(key, str):
        raise ValueError(f"a blob key must be a string, got {type(key).__name__}")
    if key == "":
        if allow_empty:
            return key
        raise ValueError("a blob key cannot be empty")
    if key.startswith("/"):
        raise ValueError(f"blob key {key!r} must be relative (no leading '/')")
    if "\\" in key:
        raise ValueError(f"blob key {key!r} cannot contain a backslash")
    if _CONTROL.search(key):
        raise ValueError(f"blob key {key!r} cannot contain NUL or control characters")
    for segment in key.split("/"):
        if segment in ("", ".", ".."):
            raise ValueError(
                f"blob key {key!r} has an empty, '.' or '..' segment; keys are plain "
                "relative paths like 'pdfs/name.pdf'"
            )
        if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
            raise ValueError(
                f"blob key segment {segment[:40]!r}… is longer than {MAX_SEGMENT_BYTES} bytes"
            )
        if segment.startswith(TEMP_PREFIX):
            raise ValueError(f"blob key {key!r} uses the reserved prefix {TEMP_PREFIX!r}")
    return key


def _full_disk_errno(exc: BaseException) -> int | None:
    """The ``FULL_ERRNOS`` code of ``exc`` or of an ``OSError`` in its cause/context chain
    (fsspec backends may wrap the filesystem's error), else ``None``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in FULL_ERRNOS:
            return current.errno
        current = current.__cause__ or current.__context__
    return None


def _check_prefix(prefix: str) -> str:
    """A folder prefix: ``""`` (everything) or a key, with one trailing ``/`` tolerated."""
    if isinstance(prefix, str) and prefix.endswith("/") and prefix != "/":
        prefix = prefix[:-1]
    return check_key(prefix, allow_empty=True)


class BlobStore:
    """Bytes under keys, on any fsspec filesystem.

    Args:
        url: fsspec URL of the root, e.g. ``file:///srv/kb/blobs`` or ``s3://bucket/kb``.
            Nothing is created until the first write.

    ``put`` is atomic on ``file://`` (write a temporary file in the same folder, then
    ``os.replace``); object stores make a single PUT atomic themselves. Other backends get
    ``makedirs(parent, exist_ok=True)`` first, which folder-based ones (sftp, hdfs) need and
    object stores treat as a no-op. Prefixes passed to
    ``list`` and ``delete_prefix`` are folders: ``"figures/a"`` covers ``figures/a/…`` and
    never ``figures/ab/…``.
    """

    def __init__(self, url: str) -> None:
        self._fs, root = fsspec.core.url_to_fs(url)
        self._local = isinstance(self._fs, LocalFileSystem)
        if self._local:
            root = os.path.abspath(root)
        self._root = root.rstrip("/") or "/"
        self._url = url

    # -- paths -------------------------------------------------------------------------------

    @property
    def root_url(self) -> str:
        """The URL this store was opened with."""
        return self._url

    @property
    def is_local(self) -> bool:
        """True for ``file://`` (and plain paths)."""
        return self._local

    def _path(self, key: str) -> str:
        key = check_key(key, allow_empty=True)
        if not key:
            return self._root
        return f"{self._root}/{key}" if self._root != "/" else f"/{key}"

    def _key(self, path: str) -> str:
        path = path.replace(os.sep, "/") if self._local else path
        root = self._root if self._root != "/" else ""
        return path[len(root) + 1 :] if path.startswith(root + "/") else path

    def url(self, key: str) -> str:
        """The fsspec URL of ``key`` (e.g. ``file:///srv/kb/blobs/pdfs/a.pdf``); not
        percent-encoded. It names the blob; it does not say the blob exists."""
        return self._fs.unstrip_protocol(self._path(check_key(key)))

    def local_path(self, key: str) -> Path | None:
        """The local file of ``key`` on ``file://`` (existing or not), else ``None``."""
        path = self._path(check_key(key))
        return Path(path) if self._local else None

    # -- writing -----------------------------------------------------------------------------

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``, replacing any previous blob.

        Raises:
            ValueError: a bad key.
            TypeError: ``data`` is not bytes-like.
            BlobStoreFullError: no room for ``data``; the key keeps its previous blob
                (``file://``) or holds none (other backends: a partial object is removed).
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"blob data must be bytes, got {type(data).__name__}")
        path = self._path(check_key(key))
        data = bytes(data)
        with self._refusing_full_disk(key, path, len(data)):
            if self._local:
                self._atomic_local(path, lambda handle: handle.write(data))
                return
            self._fs.makedirs(posixpath.dirname(path), exist_ok=True)
            self._fs.pipe_file(path, data)

    def put_file(self, key: str, source: str | Path) -> None:
        """Copy the local file ``source`` to ``key`` (streamed, never read whole).

        Raises:
            ValueError: a bad key.
            FileNotFoundError: ``source`` does not exist.
            BlobStoreFullError: no room for it (what is left under ``key`` as for ``put``).
        """
        path = self._path(check_key(key))
        source = Path(source)
        if not source.is_file():
            raise FileNotFoundError(f"cannot store {key!r}: no file at {source}")
        with self._refusing_full_disk(key, path, source.stat().st_size):
            if self._local:
                def copy(handle: IO[bytes]) -> None:
                    with open(source, "rb") as reader:
                        while block := reader.read(1 << 20):
                            handle.write(block)

                self._atomic_local(path, copy)
                return
            self._fs.makedirs(posixpath.dirname(path), exist_ok=True)
            self._fs.put_file(str(source), path)

    @contextmanager
    def _refusing_full_disk(self, key: str, path: str, size: int) -> Iterator[None]:
        """Turn a write's "no room" ``OSError`` (``FULL_ERRNOS``, raised or as a cause) into
        ``BlobStoreFullError``; on a non-local backend first remove the partial object a
        failed write can leave (fsspec's buffered files commit what they hold on close)."""
        try:
            yield
        except OSError as exc:
            code = _full_disk_errno(exc)
            if code is None:
                raise
            if not self._local:
                self._remove_partial(path, size)
            where = self._root if self._local else self._url
            raise BlobStoreFullError(
                f"the blob store {self._url} has no room: writing {key!r} ({size:,} bytes) "
                f"failed with {os.strerror(code)} ({errno.errorcode.get(code, code)}); nothing "
                f"was stored under that key. Free space on {where} or point KB_BLOB_URL at a "
                "store with room, then run `kb build`",
                root=self._url, key=key, size=size, errno=code,
            ) from exc

    def _remove_partial(self, path: str, size: int) -> None:
        """Remove what a failed write of ``size`` bytes left at ``path`` unless it is whole
        (the write landed, or an old blob of that size stayed); best effort, since the store
        that refused the write may refuse this too."""
        try:
            if self._fs.isfile(path) and int(self._fs.size(path)) != size:
                self._fs.rm_file(path)
        except OSError:
            pass

    def _atomic_local(self, path: str, write: Callable[[IO[bytes]], object]) -> None:
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, renamed after
            dir=folder, prefix=TEMP_PREFIX, delete=False
        )
        try:
            with handle:
                write(handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(handle.name, path)
        except BaseException:
            try:
                os.unlink(handle.name)
            except FileNotFoundError:
                pass
            raise

    def remove_stale_temps(self, older_than_seconds: float = STALE_TEMP_SECONDS) -> int:
        """Delete the ``TEMP_PREFIX`` files a killed writer left on ``file://`` (a ``put``
        stopped between creating its temp file and renaming it), and the folders that leaves
        empty. Only files not written for ``older_than_seconds`` go, so the live temp file of
        a concurrent writer stays. Other backends never get temp files: returns 0 there.

        A file that cannot be deleted (gone meanwhile, no permission) is skipped: this runs at
        the start of ``kb build`` (``operations.recover_interrupted``), which must not fail on
        a leftover that listings ignore anyway.

        Returns:
            How many temp files were deleted.

        Raises:
            ValueError: ``older_than_seconds`` is negative.
        """
        if older_than_seconds < 0:
            raise ValueError(f"older_than_seconds must be >= 0, got {older_than_seconds}")
        if not self._local:
            return 0
        cutoff = time.time() - older_than_seconds
        removed = 0
        for folder, _, files in os.walk(self._root):
            for name in files:
                if not name.startswith(TEMP_PREFIX):
                    continue
                path = os.path.join(folder, name)
                try:
                    if os.stat(path).st_mtime >= cutoff:
                        continue
                    os.unlink(path)
                except OSError:  # renamed by its writer meanwhile, or not ours to delete
                    continue
                removed += 1
                self._prune(folder)
        return removed

    # -- reading -----------------------------------------------------------------------------

    def get(self, key: str) -> bytes:
        """The bytes of ``key``.

        Raises:
            FileNotFoundError: no blob under ``key``.
            ValueError: a bad key.
        """
        path = self._path(check_key(key))
        try:
            if not self._fs.isfile(path):
                raise FileNotFoundError(path)
            return bytes(self._fs.cat_file(path))
        except (FileNotFoundError, IsADirectoryError) as exc:
            raise FileNotFoundError(f"no blob {key!r} in {self._url}") from exc

    def open(self, key: str) -> IO[bytes]:
        """A binary read handle on ``key`` (use as a context manager).

        Raises:
            FileNotFoundError: no blob under ``key``.
            ValueError: a bad key.
        """
        path = self._path(check_key(key))
        if not self._fs.isfile(path):
            raise FileNotFoundError(f"no blob {key!r} in {self._url}")
        return self._fs.open(path, "rb")

    def exists(self, key: str) -> bool:
        """True when a blob (not a folder) is stored under ``key``."""
        return bool(self._fs.isfile(self._path(check_key(key))))

    def size(self, key: str) -> int:
        """Size of ``key`` in bytes.

        Raises:
            FileNotFoundError: no blob under ``key``.
        """
        path = self._path(check_key(key))
        if not self._fs.isfile(path):
            raise FileNotFoundError(f"no blob {key!r} in {self._url}")
        return int(self._fs.size(path))

    def list(self, prefix: str = "") -> list[str]:
        """Every key under the folder ``prefix`` (``""`` = all), sorted by code point.

        Raises:
            ValueError: a bad prefix.
        """
        folder = _check_prefix(prefix)
        base = self._path(folder)
        if folder and not self._fs.isdir(base):
            return []
        try:
            found = self._fs.find(base)
        except FileNotFoundError:
            return []
        keys = []
        for path in found:
            key = self._key(path)
            if folder and not key.startswith(folder + "/"):
                continue
            if any(part.startswith(TEMP_PREFIX) for part in key.split("/")):
                continue
            keys.append(key)
        return sorted(keys)

    # -- deleting ----------------------------------------------------------------------------

    def delete(self, key: str) -> bool:
        """Delete ``key``; a missing key is fine. Returns whether a blob was deleted.

        On ``file://`` the folders left empty are removed too (up to the root).
        """
        path = self._path(check_key(key))
        if not self._fs.isfile(path):
            return False
        try:
            self._fs.rm_file(path)
        except FileNotFoundError:
            return False
        self._prune(os.path.dirname(path))
        return True

    def delete_prefix(self, prefix: str) -> int:
        """Delete every key under the folder ``prefix``; returns how many were deleted.

        Raises:
            ValueError: a bad prefix, or ``""`` (deleting the whole store is not a prefix
                operation).
        """
        folder = _check_prefix(prefix)
        if not folder:
            raise ValueError("delete_prefix needs a folder; refusing to delete every blob")
        deleted = sum(1 for key in self.list(folder) if self.delete(key))
        if self._local:
            self._prune(self._path(folder))
        return deleted

    def _prune(self, folder: str) -> None:
        if not self._local:
            return
        while folder.startswith(self._root + "/"):
            try:
                os.rmdir(folder)
            except OSError:  # not empty, or gone
                return
            folder = os.path.dirname(folder)

    def close(self) -> None:
        """Release what this store holds: nothing. fsspec shares one filesystem object per
        URL and options across the process (its instance cache) and has no close of its own,
        so closing it here would break other stores on the same URL. Present so every store
        role closes the same way; safe to call twice, and the store stays usable."""

    def __repr__(self) -> str:
        return f"BlobStore({self._url!r})"
