"""Errors raised by the store, and the one place where SQLAlchemy's errors become ours.

StoreError
 ├── AlreadyExists     a unique name is taken
 ├── NotFound          the named row does not exist
 ├── SchemaOutOfDate   the database is not at the code's head revision
 ├── StoreInUse        another live server owns the store (storage.lease)
 └── StoreUnavailable  the store cannot be opened or used: what failed, the URL (password hidden), the reason
      └── BadStoreUrl  the URL itself is wrong: unparsable, or no such dialect or driver

``log_store_failure(log, what, exc)`` logs a failed background store call: one line without a traceback when the
store itself failed (a driver error: disk full, connection refused), a traceback for anything else (a bug).

``store_errors(url, action)`` is the translation point: every entry into the store from the command line or
the server's start-up runs inside it, and an ``ArgumentError``/``NoSuchModuleError`` (a bad URL) or any other
``SQLAlchemyError`` comes out as one of the two last errors, ``from`` the original.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


class StoreError(Exception):
    """Base of every error the store raises on purpose."""


class AlreadyExists(StoreError):
    pass


class NotFound(StoreError):
    pass


class SchemaOutOfDate(StoreError):
    pass


class NoStore(SchemaOutOfDate):
    """Nothing at the store URL holds a subgate store (a missing SQLite file, a database without subgate's
    tables): an operator command that looked in the wrong place, not a store to upgrade."""


class StoreInUse(StoreError):
    """A live server holds the store's lease (storage.lease)."""


class StoreUnavailable(StoreError):
    """The store could not be opened or used; the message is one line meant for the operator."""


class BadStoreUrl(StoreUnavailable):
    """The store URL cannot be used at all (syntax, unknown dialect or driver)."""


def safe_url(url: str) -> str:
    """``url`` with its password hidden; the text as given when it does not parse."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url.split("@", 1)[-1] if "@" in url else url


@contextmanager
def store_errors(url: str, action: str = "open the store") -> Iterator[None]:
    """Run a unit of store work; SQLAlchemy's errors leave it as ``StoreUnavailable`` (or ``BadStoreUrl``).

    Args:
        url: the store URL (only shown with its password hidden).
        action: what was being done, as a verb phrase ("open the store", "upgrade the store").
    """
    from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

    try:
        yield
    except (ArgumentError, NoSuchModuleError) as exc:
        raise BadStoreUrl(f"bad store URL {safe_url(url)!r}: {_first_line(exc)}{_url_hint(url)}") from exc
    except DBAPIError as exc:
        raise StoreUnavailable(f"cannot {action} {safe_url(url)}: {_first_line(exc.orig)}") from exc
    except SQLAlchemyError as exc:
        raise StoreUnavailable(f"cannot {action} {safe_url(url)}: {_first_line(exc)}") from exc


def _url_hint(url: str) -> str:
    """For a bare file path given as the store: the SQLite URL of that file."""
    if "://" in url or not url.strip():
        return ""
    return f"; for a SQLite file there, give sqlite:///{url} (sqlite:////absolute/path for an absolute path)"


def log_store_failure(log: logging.Logger, what: str, exc: BaseException) -> None:
    """Log that ``what`` failed (e.g. "could not renew the store's lease"): at error level with the driver's reason
    when the store failed (``DBAPIError``: it is down, full or refusing), with the traceback otherwise."""
    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, DBAPIError):
        log.error("%s: %s", what, _first_line(exc.orig))
    else:
        log.error("%s", what, exc_info=exc)


def _first_line(exc: BaseException | None) -> str:
    """The driver's short reason: the first line of the message, without SQLAlchemy's link to its docs."""
    text = str(exc).strip() if exc is not None else ""
    line = text.splitlines()[0] if text else type(exc).__name__
    return line.split(" (Background on this error")[0].strip()
