"""The lag job on a real standalone Spark cluster: a master and one worker from the pyspark distribution on
loopback, the job submitted with ``spark-submit`` exactly as docs/pipeline.md says (the package zipped with
``--py-files``, the JDBC jars with ``--jars``), its JSON output checked."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

import subgate
from subgate.storage.db import make_engine, upgrade
from subgate.storage.models import Ack, AckCursor, JournalMessage, Subscription
from tests.support.polling import eventually

pytestmark = pytest.mark.slow
SPARK_HOME = Path(__import__("pyspark").__file__).parent
JARS = "/usr/share/java/sqlite-jdbc.jar,/usr/share/java/postgresql.jar"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(tmp_path / "local"),
        "SPARK_LOG_DIR": str(tmp_path / "logs"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


def start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=out, stderr=out, env=env)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    """A standalone master and one worker (1 core, 1 GiB) on loopback; the master's URL."""
    env = spark_env(tmp_path)
    conf = tmp_path / "spark.properties"
    conf.write_text("spark.master.rest.enabled false\nspark.ui.enabled false\n")
    port = free_port()
    master_log, worker_log = tmp_path / "master.log", tmp_path / "worker.log"
    common = ["--host", "127.0.0.1", "--webui-port", "0", "--properties-file", str(conf)]
    processes = [start(["org.apache.spark.deploy.master.Master", "--port", str(port), *common], master_log, env)]
    try:
        url = f"spark://127.0.0.1:{port}"
        eventually(lambda: "ALIVE" in master_log.read_text(), timeout=90, what="the master up")
        worker = ["org.apache.spark.deploy.worker.Worker", url, "--cores", "1", "--memory", "1g"]
        processes.append(start([*worker, "--work-dir", str(tmp_path / "work"), *common], worker_log, env))
        eventually(lambda: "Successfully registered" in worker_log.read_text(), timeout=90, what="the worker up")
        yield url
    finally:
        for process in reversed(processes):
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def package_zip(path: Path) -> Path:
    """The ``subgate`` package as ``--py-files`` takes it."""
    root = Path(subgate.__file__).parent
    with zipfile.ZipFile(path, "w") as bundle:
        for file in root.rglob("*"):
            if file.suffix in (".py", ".properties") and "__pycache__" not in file.parts:
                bundle.write(file, file.relative_to(root.parent).as_posix())
    return path


def seeded_store(url: str) -> datetime:
    """One durable subscription on prices: journal 1..4, low-water 1, 3 accepted: backlog 2 (rows 2 and 4)."""
    upgrade(url)
    now = datetime.now(UTC)
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.insert(JournalMessage), [
            dict(id=i, address="prices", node_kind="topic", publisher_id="p", publisher_seq=i, bookmark=f"p|{i}|",
                 ts=now - timedelta(minutes=10 - i), durable=True, priority=4, size=10, payload=b"x")
            for i in range(1, 5)
        ])  # fmt: skip
        conn.execute(sa.insert(AckCursor).values(id=1, owner_kind="subscription", owner="app1.s1", address="prices",
                                                 low_water=1, updated_at=now))  # fmt: skip
        conn.execute(sa.insert(Ack).values(cursor_id=1, message_id=3))
        conn.execute(sa.insert(Subscription).values(id=1, kind="durable", durable=True, client_id="app1", name="s1",
                                                    topic="prices", cursor_id=1, created_at=now))  # fmt: skip
    engine.dispose()
    return now


def test_spark_submit_runs_the_lag_job_on_a_standalone_cluster(cluster, tmp_path):
    store = f"sqlite:///{tmp_path / 'subgate.db'}"
    seeded_store(store)
    script = Path(subgate.__file__).parent / "cli" / "pipeline.py"
    command = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--master", cluster,
        "--py-files", str(package_zip(tmp_path / "subgate.zip")),
        "--jars", JARS,
        "--conf", "spark.ui.enabled=false",
        str(script), "lag", "--store", store, "--json",
    ]  # fmt: skip
    done = subprocess.run(command, env=spark_env(tmp_path), capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    (row,) = json.loads(done.stdout)
    assert row.pop("oldest_unaccepted_age_s") > 0
    assert row == {
        "kind": "subscription", "name": "s1", "client_id": "app1", "topic": "prices",
        "subscription_kind": "durable", "low_water": 1, "backlog": 2, "in_last_hour": 4, "out_last_hour": 2,
    }  # fmt: skip
    assert "Registering app" in (tmp_path / "master.log").read_text()  # the job ran on this cluster
    assert "Asked to launch executor" in (tmp_path / "worker.log").read_text()
