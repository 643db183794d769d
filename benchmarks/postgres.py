"""Throwaway Postgres databases on a server the caller names, for benchmarks and tests.

The tests import this module (benchmarks never import tests, ``tests/test_import_rules.py``).
Every database is created empty with a random name and dropped ``WITH (FORCE)`` on exit, so a
crashed run leaves nothing that a later one trips over.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from kb_shared.stores.factory import SQL_DIR
from kb_shared.stores.sql import apply_sql_files, make_engine


@contextmanager
def scratch_database(admin_url: str, prefix: str) -> Iterator[str]:
    """Create an empty database ``{prefix}_{12 hex digits}`` on ``admin_url``'s server (a role
    that may CREATE DATABASE), yield its URL (password included), drop it afterwards."""
    admin_sa_url = sa.make_url(admin_url)
    admin = make_engine(admin_sa_url, isolation_level="AUTOCOMMIT")
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield admin_sa_url.set(database=name).render_as_string(hide_password=False)
    finally:
        admin.dispose()  # a fresh connection: a restarted server ends pooled ones
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def reader_login(url: str) -> str:
    """Give the ``kb_reader`` role (created by ``sql/003_reader_role.sql``, without a password)
    a random password, and return ``url`` logged in as ``kb_reader`` instead."""
    password = secrets.token_hex(12)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"ALTER ROLE kb_reader PASSWORD '{password}'")
    finally:
        engine.dispose()
    reader = sa.make_url(url).set(username="kb_reader", password=password)
    return reader.render_as_string(hide_password=False)


@contextmanager
def reader_database(admin_url: str, prefix: str) -> Iterator[tuple[str, str]]:
    """``(writer URL, kb_reader URL)`` of a scratch database built from ``sql/`` (what
    ``kb db init`` applies); dropped afterwards."""
    with scratch_database(admin_url, prefix) as url:
        writer = make_engine(url)
        try:
            apply_sql_files(writer, SQL_DIR)
        finally:
            writer.dispose()
        yield url, reader_login(url)
