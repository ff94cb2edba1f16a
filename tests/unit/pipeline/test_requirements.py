"""``subgate pipeline ...`` without pyspark, Java or a JDBC driver: one line saying what to install, exit code 1.

No Spark starts here: the check runs before any session."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from subgate.cli.main import main
from subgate.pipeline import session


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "subgate.db"
    path.write_bytes(b"")
    return f"sqlite:///{path}"


def run(*args: str):
    return CliRunner().invoke(main, ["pipeline", *args], catch_exceptions=False)


@pytest.mark.parametrize("job", ["lag", "audit"])
def test_without_pyspark(monkeypatch, store, job):
    monkeypatch.setattr(session, "_installed", lambda module: False)
    result = run(job, "--store", store)
    assert result.exit_code == 1
    assert result.stderr == "Error: the pipeline needs PySpark: pip install 'subgate[pipeline]'\n"


def test_without_java(monkeypatch, store, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    result = run("lag", "--store", store, "--json")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: the pipeline needs Java 17 or newer: apt-get install ")
    assert result.stderr.count("\n") == 1 and result.stdout == ""


@pytest.mark.parametrize(
    ("url", "package"),
    [
        ("sqlite:///{}", "libxerial-sqlite-jdbc-java"),
        ("postgresql+psycopg://u@127.0.0.1:1/x", "libpostgresql-jdbc-java"),
    ],
)
def test_without_the_jdbc_driver(monkeypatch, store, tmp_path, url, package):
    monkeypatch.setattr(session, "JAR_DIR", tmp_path)
    result = run("audit", "--store", url.format(store.removeprefix("sqlite:///")))
    assert result.exit_code == 1
    assert result.stderr.endswith(f"apt-get install {package}\n") and result.stderr.count("\n") == 1


def test_a_store_that_is_not_there(tmp_path):
    result = run("lag", "--store", f"sqlite:///{tmp_path / 'nothing.db'}")
    assert result.exit_code == 1
    assert "the SQLite file does not exist" in result.stderr
