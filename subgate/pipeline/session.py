"""The SparkSession the pipeline's commands run on, and the check that what it needs is installed.

Owns the JVM-side settings (they must be set before the first ``getOrCreate``: pyspark passes them to the JVM
only when it starts it): the JDBC driver jars from Debian's packages as local paths (nothing is resolved from
Maven at run time), the session time zone (UTC: journal times are UTC), loopback-only networking, Spark's own
console progress bar off and its logging down to errors (``log4j2.properties`` beside this module), and
PySpark's DataFrame debugging off (it is read once per Python process: set at the start, it saves 4-5 calls into
the JVM per column function). ``missing_requirement`` says in one line what to install when pyspark, Java or a
driver jar is missing.
``session_settings`` sets SQL settings for one step of a job and puts the session's back afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JAR_DIR = Path(os.environ.get("SUBGATE_JDBC_JARS", "/usr/share/java"))
SQLITE_JAR = "sqlite-jdbc.jar"  # Debian package libxerial-sqlite-jdbc-java
POSTGRES_JAR = "postgresql.jar"  # Debian package libpostgresql-jdbc-java
JAR_PACKAGES = {SQLITE_JAR: "libxerial-sqlite-jdbc-java", POSTGRES_JAR: "libpostgresql-jdbc-java"}
JNI_DIR = "/usr/lib/x86_64-linux-gnu/jni"  # the SQLite driver's native library (libxerial-sqlite-jdbc-jni)
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")


class PipelineUnavailable(Exception):
    """Something the pipeline needs is not installed; the message says what to install, in one line."""


def jar_for(jdbc_url: str) -> str:
    """The driver jar a JDBC URL needs."""
    return SQLITE_JAR if jdbc_url.startswith("jdbc:sqlite:") else POSTGRES_JAR


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def missing_requirement(jdbc_url: str | None = None) -> str | None:
    """What is missing for a pipeline run (one line), or None when pyspark, Java and the store's driver are there."""
    if not _installed("pyspark"):
        return "the pipeline needs PySpark: pip install 'subgate[pipeline]'"
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home, "bin", "java") if java_home else shutil.which("java")
    if java is None or not Path(java).exists():
        return "the pipeline needs Java 17 or newer: apt-get install openjdk-17-jre-headless (or set JAVA_HOME)"
    jars = [jar_for(jdbc_url)] if jdbc_url else list(JAR_PACKAGES)
    for jar in jars:
        if not (JAR_DIR / jar).exists():
            return f"the pipeline needs the JDBC driver {JAR_DIR / jar}: apt-get install {JAR_PACKAGES[jar]}"
    return None


@dataclass(frozen=True)
class SessionSettings:
    """How to start the session: ``master`` (``local[*]``, ``spark://HOST:PORT``...), the scratch directory, and
    the test-only JVM flags (C1 compiler only, serial GC: a faster start on tiny data, slower long jobs)."""

    master: str | None = "local[*]"  # None: the master spark-submit was given
    app_name: str = "subgate-pipeline"
    shuffle_partitions: int = 4
    driver_memory: str = "2g"
    scratch: Path | None = None
    for_tests: bool = False
    extra: dict[str, str] = field(default_factory=dict)


def _java_options(settings: SessionSettings) -> str:
    options = [f"-Dlog4j2.configurationFile=file:{LOG_CONFIG}", "-Duser.timezone=UTC"]
    if settings.scratch is not None:
        options.append(f"-Djava.io.tmpdir={settings.scratch}")
    if settings.for_tests:
        options += ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
    return " ".join(options)


def under_spark_submit() -> bool:
    """Whether this Python process was started by ``spark-submit`` (its JVM is already running, with the
    master and the jars the command line gave)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def start_session(settings: SessionSettings) -> SparkSession:
    """A SparkSession with the pipeline's settings (or the running one: JVM settings only apply to the first).
    Under ``spark-submit`` the JVM is already up: its master stands unless ``settings.master`` names one."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if settings.scratch is not None:
        settings.scratch.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("SPARK_LOCAL_DIRS", str(settings.scratch))
    jars = ",".join(str(JAR_DIR / jar) for jar in JAR_PACKAGES if (JAR_DIR / jar).exists())
    builder = SparkSession.builder.appName(settings.app_name)
    if settings.master is not None:
        builder = builder.master(settings.master)
    config = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.default.parallelism": str(settings.shuffle_partitions),
        "spark.driver.memory": settings.driver_memory,
        "spark.sql.session.timeZone": "UTC",
        # min/max/count of a Parquet column from the files' footers, not a scan (the --from-parquet snapshot)
        "spark.sql.parquet.aggregatePushdown": "true",
        "spark.sql.execution.pythonUDF.arrow.enabled": "false",
        # no Python call site recorded for each column function: 4-5 calls into the JVM each (conf, origin set
        # and clear), 0.1-0.3 s of a lag run's plan building; it only adds the call site to analysis errors
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        "spark.driver.extraJavaOptions": _java_options(settings),
        "spark.driver.extraLibraryPath": JNI_DIR,
        "spark.executor.extraLibraryPath": JNI_DIR,
        "spark.jars": jars,
    }
    if settings.master is not None and settings.master.startswith("local"):
        config.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    if settings.scratch is not None:
        config["spark.sql.warehouse.dir"] = str(settings.scratch / "warehouse")
    config.update(settings.extra)
    for key, value in config.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def session_settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Run the ``with`` body with these SQL settings, then put back what the session had (unset ones unset)."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, before in previous.items():
            if before is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, before)
