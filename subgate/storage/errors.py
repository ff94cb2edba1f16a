"""Errors raised by the store's repositories.

StoreError
 ├── AlreadyExists     a unique name is taken
 ├── NotFound          the named row does not exist
 └── SchemaOutOfDate   the database is not at the code's head revision
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error the store raises on purpose."""


class AlreadyExists(StoreError):
    pass


class NotFound(StoreError):
    pass


class SchemaOutOfDate(StoreError):
    pass
