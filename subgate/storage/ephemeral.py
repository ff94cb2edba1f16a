"""The throwaway store of ``subgate serve --ephemeral``: a SQLite file in a private temporary folder.

Owns creating that folder (under ``/dev/shm``, memory-backed on Linux, when it is writable; else the system's
temporary folder), creating the schema in it directly from the models and stamping it at the head revision (the
same schema the migrations build: ``tests/storage/test_migrations.py`` holds the models to the migrations, and
no migration inserts rows), removing the folder, and sweeping folders left by ephemeral servers that died
without cleaning up (``kill -9``).

Why a file and not ``sqlite://`` (``:memory:``): an in-memory SQLite database belongs to one connection, and the
server opens several (the writer, the figure reader, the login checks, and the journal writer process, which is
another process altogether). A file on tmpfs costs about the same and every one of them sees the same store.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from sqlalchemy import Column, MetaData, String, Table

from subgate.storage.db import alembic_config, make_engine
from subgate.storage.lease import pid_running

PREFIX = "subgate-ephemeral-"
SHARED_MEMORY = Path("/dev/shm")


def _base_folder() -> Path:
    if SHARED_MEMORY.is_dir() and os.access(SHARED_MEMORY, os.W_OK | os.X_OK):
        return SHARED_MEMORY
    return Path(tempfile.gettempdir())


def sweep(base: Path | None = None) -> list[Path]:
    """Remove the folders of ephemeral servers that are gone (their pid is in the folder's name); returns them."""
    removed = []
    for folder in (base or _base_folder()).glob(f"{PREFIX}*"):
        pid_text = folder.name[len(PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit() or pid_running(int(pid_text)):
            continue  # not ours, or its server still runs
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def head_revision() -> str:
    """The migrations' head revision (read from the scripts, so a new migration moves it)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    if head is None:
        raise RuntimeError("the migrations have no head revision")
    return head


def create_schema(url: str) -> None:
    """The full schema on an empty database at ``url``, stamped at the head revision (``subgate db current``
    and the ``--store`` commands then accept it as up to date)."""
    from subgate.storage.models import Base

    engine = make_engine(url)
    try:
        version = Table("alembic_version", MetaData(), Column("version_num", String(32), primary_key=True))
        with engine.begin() as connection:
            Base.metadata.create_all(connection)
            version.create(connection)
            connection.execute(version.insert().values(version_num=head_revision()))
    finally:
        engine.dispose()


class EphemeralStore:
    """A fresh store for one server process: ``url`` to serve, ``remove()`` when done."""

    def __init__(self, base: Path | None = None) -> None:
        base = base or _base_folder()
        sweep(base)
        self.folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base))
        self.url = f"sqlite:///{self.folder / 'subgate.db'}"
        try:
            create_schema(self.url)
        except BaseException:
            self.remove()
            raise

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
