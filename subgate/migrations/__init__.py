"""Alembic migrations for the store (``subgate db upgrade`` runs them)."""
