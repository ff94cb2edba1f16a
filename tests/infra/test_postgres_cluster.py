"""The throwaway PostgreSQL cluster used by the storage tests really works."""

from __future__ import annotations

import os
import socket

import pytest
import sqlalchemy as sa

from tests.support.postgres import PostgresCluster, PostgresNotInstalledError, find_postgres_bindir

pytestmark = pytest.mark.postgres


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_cluster_lifecycle_two_databases_and_fsync() -> None:
    cluster = PostgresCluster()
    with cluster:
        port = cluster.port
        root = cluster.root
        assert _port_open(port)
        assert cluster.is_running()
        if os.geteuid() == 0:
            assert root.stat().st_uid != 0, "the cluster must not be owned by root"

        url_a = cluster.create_database("infra_a")
        url_b = cluster.create_database("infra_b")
        assert url_a == f"postgresql+psycopg://postgres@127.0.0.1:{port}/infra_a"
        assert url_b.endswith("/infra_b")

        engine_a = sa.create_engine(url_a)
        engine_b = sa.create_engine(url_b)
        try:
            with engine_a.begin() as conn:
                conn.exec_driver_sql("CREATE TABLE item (id integer PRIMARY KEY, name text NOT NULL)")
                conn.execute(sa.text("INSERT INTO item VALUES (:id, :name)"), {"id": 1, "name": "alpha"})
            with engine_a.connect() as conn:
                assert conn.execute(sa.text("SELECT name FROM item WHERE id = 1")).scalar_one() == "alpha"
                assert conn.exec_driver_sql("SHOW fsync").scalar_one() == "on"
                assert conn.exec_driver_sql("SHOW synchronous_commit").scalar_one() == "on"
                assert conn.exec_driver_sql("SHOW listen_addresses").scalar_one() == "127.0.0.1"
            # The databases are independent.
            with engine_b.connect() as conn:
                assert conn.exec_driver_sql("SELECT current_database()").scalar_one() == "infra_b"
                assert conn.exec_driver_sql("SELECT to_regclass('item')").scalar_one() is None
        finally:
            engine_a.dispose()
            engine_b.dispose()

        with pytest.raises(ValueError):
            cluster.create_database('bad"; DROP DATABASE postgres; --')

    assert not cluster.started
    assert not _port_open(port)
    assert not root.exists()
    cluster.stop()  # idempotent


def test_committed_data_survives_a_crash() -> None:
    with PostgresCluster() as cluster:
        url = cluster.create_database()
        engine = sa.create_engine(url)
        try:
            with engine.begin() as conn:
                conn.exec_driver_sql("CREATE TABLE journal (seq bigint PRIMARY KEY)")
                conn.exec_driver_sql("INSERT INTO journal SELECT generate_series(1, 100)")
            engine.dispose()
            cluster.crash()
            assert not cluster.is_running()
            assert not _port_open(cluster.port)
            cluster.start_server()
            with engine.connect() as conn:
                assert conn.exec_driver_sql("SELECT count(*) FROM journal").scalar_one() == 100
        finally:
            engine.dispose()


def test_fixtures_give_each_test_a_fresh_database(postgres_cluster: PostgresCluster, postgres_url: str) -> None:
    assert postgres_url.startswith(f"postgresql+psycopg://postgres@127.0.0.1:{postgres_cluster.port}/t_")
    engine = sa.create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            assert (
                conn.exec_driver_sql(
                    "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
                ).scalar_one()
                == 0
            )
            conn.exec_driver_sql("CREATE TABLE scratch (x int)")
    finally:
        engine.dispose()


def test_fixture_database_is_dropped_and_recreated(postgres_url: str) -> None:
    # Same table name as the previous test: it must not exist in this test's database.
    engine = sa.create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT to_regclass('scratch')").scalar_one() is None
    finally:
        engine.dispose()


def test_missing_binaries_give_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("SUBGATE_PG_BINDIR", str(tmp_path))
    with pytest.raises(PostgresNotInstalledError, match="initdb"):
        find_postgres_bindir()
    with pytest.raises(PostgresNotInstalledError):
        PostgresCluster().start()
