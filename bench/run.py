#!/usr/bin/env python3
"""Benchmark runner for subgate and its peers (ActiveMQ 5.17 with its AMQP module, RabbitMQ 3.10 with its AMQP 1.0
plugin, proton's C example broker and proton's Python example broker).

One command: installs the Debian packages it needs, compiles the C load client (bench/loadgen.c), starts every
broker as its own child process on 127.0.0.1 in a temp dir, runs scenarios S1..S4 against each one in turn,
measures broker CPU per message and memory from /proc, stops each broker by PID, prints a table, writes
bench/results/<timestamp>.json and rewrites the marked section of docs/performance.md.

Standard library only; run with any python3 (3.8+):

    python3 bench/run.py                 # full size: 200k messages per scenario
    python3 bench/run.py --count 20000   # quick run
    python3 bench/run.py --repeat 3      # three interleaved rounds, medians reported

ActiveMQ's AMQP module is not in Debian's activemq package: it is built locally from the upstream source
(bench/README.md, "ActiveMQ") and named with --activemq-amqp-jar; without it ActiveMQ is reported unavailable.

See bench/README.md for what each scenario means.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
BUILD = BENCH / "build"
RESULTS = BENCH / "results"
DOC = REPO / "docs" / "performance.md"
LOADGEN_SRC = BENCH / "loadgen.c"
LOADGEN = BUILD / "loadgen"
PROTON_EXAMPLE = Path("/usr/share/proton/examples/python/broker.py")
PROTON_C_BROKER_SRC = Path("/usr/share/proton/examples/c/broker.c")
PROTON_C_BROKER = BUILD / "proton-c-broker"
ACTIVEMQ_HOME = Path("/usr/share/activemq")
ACTIVEMQ_AMQP_JAR = BUILD / "peers" / "activemq-amqp-5.17.2.jar"  # built locally, never committed
JMS_CLIENT_LIB = REPO.parent / "shared" / "jms-client" / "lib"  # proton-j 0.34.1, which activemq-amqp needs
RABBIT_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"

DEBIAN_PACKAGES = [
    "gcc",
    "libc6-dev",
    "pkg-config",
    "libqpid-proton11-dev",  # Proton-C headers and libqpid-proton.so (core + proactor)
    "libqpid-proton11-dev-examples",  # /usr/share/proton/examples/python/broker.py
    "python3-qpid-proton",  # the proton binding for Debian's python3, which runs the example broker
    "libsasl2-modules",  # Cyrus PLAIN/ANONYMOUS for Proton-C's SASL layer
    "rabbitmq-server",  # bookworm: 3.10.x, with the rabbitmq_amqp1_0 plugin
    "erlang-base",
    "activemq",  # bookworm: 5.17.2 (the broker, KahaDB, the launcher; no AMQP module)
    "default-jre-headless",
]

SCENARIOS = ("S1", "S2", "S2T", "S3", "S4")
SCENARIO_TITLES = {
    "S1": "S1 — queue, at-least-once, send and receive concurrently (end-to-end msgs/s)",
    "S2": "S2 — durable messages to a durable queue with no consumer (`accepted` after disk), then drain",
    "S2T": "S2T — durable messages to a topic with one idle JMS durable subscription (`accepted` after disk), "
    "then drain the subscription (subgate only; the peers' figure to beat is their S2)",
    "S3": "S3 — one topic to 10 consumers (deliveries/s across all consumers)",
    "S4": "S4 — one message in flight (round trip, µs)",
}
CLK_TCK = os.sysconf("SC_CLK_TCK")
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------- setup


def missing_packages(packages: list[str] = DEBIAN_PACKAGES) -> list[str]:
    missing = []
    for pkg in packages:
        r = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", pkg], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        if "install ok installed" not in r.stdout:
            missing.append(pkg)
    return missing


def ensure_packages(packages: list[str] = DEBIAN_PACKAGES) -> None:
    if not shutil.which("dpkg-query"):
        log("not a Debian system: skipping package installation")
        return
    missing = missing_packages(packages)
    if not missing:
        return
    if os.geteuid() != 0:
        sys.exit(f"missing Debian packages {missing}; run as root or install them: apt-get install {' '.join(missing)}")
    log(f"installing Debian packages: {' '.join(missing)}")
    # RUNLEVEL=1 keeps invoke-rc.d from starting a system rabbitmq-server on hosts without a policy-rc.d; the
    # benchmark never uses a system instance anyway (own node name, ports, epmd and directories).
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", RUNLEVEL="1")
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, timeout=600)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], check=True, env=env, timeout=1200
    )


def build_loadgen() -> None:
    BUILD.mkdir(parents=True, exist_ok=True)
    if LOADGEN.exists() and LOADGEN.stat().st_mtime >= LOADGEN_SRC.stat().st_mtime:
        return
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "libqpid-proton"], stdout=subprocess.PIPE, text=True, check=True
    ).stdout.split()
    cmd = ["gcc", "-O2", "-Wall", "-Wextra", "-std=c11", "-o", str(LOADGEN), str(LOADGEN_SRC), *flags]
    log("compiling loadgen: " + " ".join(cmd))
    subprocess.run(cmd, check=True, timeout=300)


def build_proton_c_broker() -> None:
    """proton's C example broker (multi-threaded, in memory, queues only), from libqpid-proton11-dev-examples."""
    if not PROTON_C_BROKER_SRC.exists():
        return
    BUILD.mkdir(parents=True, exist_ok=True)
    if PROTON_C_BROKER.exists() and PROTON_C_BROKER.stat().st_mtime >= PROTON_C_BROKER_SRC.stat().st_mtime:
        return
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "libqpid-proton"],  # core and proactor in one library
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    ).stdout.split()
    cmd = ["gcc", "-O2", "-std=gnu11", "-o", str(PROTON_C_BROKER), str(PROTON_C_BROKER_SRC), *flags, "-lpthread"]
    log("compiling proton's C example broker: " + " ".join(cmd))
    subprocess.run(cmd, check=True, timeout=300)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with code {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.25)
    raise RuntimeError(f"port {port} did not accept connections within {seconds:.0f} s")


def tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:])


# ---------------------------------------------------------------------------------------------- /proc


def proc_tree(root: int) -> list[int]:
    """The root pid and every live descendant."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(name))
    out, i = [root], 0
    while i < len(out):
        out.extend(children.get(out[i], []))
        i += 1
    return out


def cpu_seconds(pids: list[int]) -> float:
    """utime+stime (+ reaped children's) of the given processes, in seconds."""
    ticks = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        ticks += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return ticks / CLK_TCK


def status_kb(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class RssSampler:
    """Samples the summed VmRSS of a process tree every 0.2 s while a scenario runs; keeps the maximum."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        kb = sum(status_kb(p, "VmRSS") for p in proc_tree(self.root))
        self.peak_kb = max(self.peak_kb, kb)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample()

    def __enter__(self) -> RssSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sample()


# ---------------------------------------------------------------------------------------------- brokers


class Broker:
    """A broker child process: start() returns once its AMQP port accepts connections; stop() ends it by PID."""

    name = "?"
    label = "?"
    sasl = ["--sasl", "anonymous"]
    topic_supported = True
    durable_note = ""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.version = ""
        self.logfile = workdir / f"{self.name}.log"

    # addressing: extra loadgen arguments for a queue node and for a topic node
    def queue_args(self) -> list[str]:
        raise NotImplementedError

    def topic_args(self, run_id: str) -> list[str]:
        raise NotImplementedError

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def tree(self) -> list[int]:
        return proc_tree(self.pid)

    def peak_hwm_kb(self) -> int:
        return sum(status_kb(p, "VmHWM") for p in self.tree())

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        pids = self.tree()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            log(f"{self.name}: did not stop on SIGTERM within 30 s, sending SIGKILL to {pids}")
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            self.proc.wait(timeout=10)
        # anything of ours still alive (helper processes of the VM)
        for p in pids[1:]:
            try:
                os.kill(p, 0)
            except OSError:
                continue
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


class ProtonExample(Broker):
    name = "proton-example"
    label = "proton example (Python)"
    topic_supported = False
    durable_note = "in memory: `accepted` is not after disk"

    def __init__(self, workdir: Path, python: str) -> None:
        super().__init__(workdir)
        self.python = python

    def queue_args(self) -> list[str]:
        return ["--address", "bench.q"]

    def topic_args(self, run_id: str) -> list[str]:
        return ["--address", "bench.t"]

    def start(self) -> None:
        if not PROTON_EXAMPLE.exists():
            raise RuntimeError(f"{PROTON_EXAMPLE} missing (package libqpid-proton11-dev-examples)")
        self.port = free_port()
        ver = subprocess.run(
            [
                self.python,
                "-c",
                "import proton, sys; print('.'.join(map(str, proton.VERSION)), sys.version.split()[0])",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ).stdout.split()
        if len(ver) == 2:
            self.version = f"python-qpid-proton {ver[0]} on {self.python} (Python {ver[1]})"
        out = open(self.logfile, "wb")
        self.proc = subprocess.Popen(
            [self.python, str(PROTON_EXAMPLE), "-a", f"127.0.0.1:{self.port}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
        )
        try:
            wait_port(self.port, self.proc, 30)
        except RuntimeError as e:
            raise RuntimeError(f"{e}: {tail(self.logfile)}") from None


class ProtonC(Broker):
    """proton's C example broker: in memory, queues only, four proactor threads (the C floor to close in on)."""

    name = "proton-c"
    label = "proton example (C)"
    topic_supported = False
    durable_note = "in memory: `accepted` is not after disk"

    def queue_args(self) -> list[str]:
        return ["--address", "bench.q"]

    def topic_args(self, run_id: str) -> list[str]:
        return ["--address", "bench.t"]

    def start(self) -> None:
        if not PROTON_C_BROKER.exists():
            raise RuntimeError(f"{PROTON_C_BROKER} not built ({PROTON_C_BROKER_SRC}: libqpid-proton11-dev-examples)")
        self.port = free_port()
        self.version = "proton-c " + dpkg_version("libqpid-proton11-dev") + " examples/c/broker.c (4 threads)"
        out = open(self.logfile, "wb")
        self.proc = subprocess.Popen(
            [str(PROTON_C_BROKER), "127.0.0.1", str(self.port)], stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir
        )
        try:
            wait_port(self.port, self.proc, 30)
        except RuntimeError as e:
            raise RuntimeError(f"{e}: {tail(self.logfile)}") from None


class ActiveMQ(Broker):
    """ActiveMQ 5.17 (Debian's broker jars) with the AMQP transport module built from the upstream 5.17.2 tag.

    KahaDB at its defaults (journal disk syncs on), JMX off, the memory limit of the upstream distribution's
    activemq.xml (70 % of a 1 GiB heap: the launcher's default -Xmx1G), one AMQP connector on 127.0.0.1."""

    name = "activemq"
    label = "ActiveMQ 5.17 (AMQP)"

    def __init__(self, workdir: Path, amqp_jar: Path) -> None:
        super().__init__(workdir)
        self.amqp_jar = amqp_jar

    def queue_args(self) -> list[str]:
        return ["--address", "queue://bench.q"]

    def topic_args(self, run_id: str) -> list[str]:
        return ["--address", f"topic://bench.t.{run_id}"]

    def classpath(self) -> str:
        jars = [ACTIVEMQ_HOME / "bin" / "activemq.jar"]
        jars += sorted((ACTIVEMQ_HOME / "lib").glob("*.jar")) + sorted(
            (ACTIVEMQ_HOME / "lib" / "optional").glob("*.jar")
        )
        jars += [self.amqp_jar, *sorted(JMS_CLIENT_LIB.glob("proton-j-*.jar"))]
        return ":".join(str(j) for j in jars)

    def start(self) -> None:
        if not (ACTIVEMQ_HOME / "bin" / "activemq.jar").exists():
            raise RuntimeError(f"{ACTIVEMQ_HOME} missing (package activemq)")
        if not self.amqp_jar.exists():
            raise RuntimeError(
                f"{self.amqp_jar} missing: build activemq-amqp from the upstream activemq-5.17.2 tag (bench/README.md)"
            )
        if not list(JMS_CLIENT_LIB.glob("proton-j-*.jar")):
            raise RuntimeError(f"no proton-j jar in {JMS_CLIENT_LIB}")
        self.port = free_port()
        w = self.workdir
        data = w / "data"
        conf = w / "activemq.xml"
        conf.write_text(
            '<beans xmlns="http://www.springframework.org/schema/beans"'
            ' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="'
            "http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans.xsd "
            'http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">\n'
            f'  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="bench" useJmx="false"'
            f' dataDirectory="{data}">\n'
            f'    <persistenceAdapter><kahaDB directory="{data / "kahadb"}"/></persistenceAdapter>\n'
            "    <systemUsage><systemUsage>\n"
            '      <memoryUsage><memoryUsage percentOfJvmHeap="70"/></memoryUsage>\n'
            '      <storeUsage><storeUsage limit="20 gb"/></storeUsage>\n'
            '      <tempUsage><tempUsage limit="10 gb"/></tempUsage>\n'
            "    </systemUsage></systemUsage>\n"
            "    <transportConnectors>\n"
            f'      <transportConnector name="amqp" uri="amqp://127.0.0.1:{self.port}?maximumConnections=1000'
            '&amp;wireFormat.maxFrameSize=104857600"/>\n'
            "    </transportConnectors>\n"
            "  </broker>\n"
            "</beans>\n"
        )
        self.version = (
            f"ActiveMQ {dpkg_version('activemq')} (Debian), activemq-amqp {self.amqp_jar.name}, "
            + (subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines() or ["java ?"])[
                0
            ]
        )
        cmd = [
            "java",
            "-Xms64M",
            "-Xmx1G",
            f"-Dactivemq.home={ACTIVEMQ_HOME}",
            f"-Dactivemq.base={w}",
            f"-Dactivemq.data={data}",
            "-cp",
            self.classpath(),
            "org.apache.activemq.console.Main",
            "start",
            f"xbean:file:{conf}",
        ]
        out = open(self.logfile, "wb")
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=w)
        try:
            wait_port(self.port, self.proc, 90)
        except RuntimeError as e:
            self.stop()
            raise RuntimeError(f"{e}: {tail(self.logfile)}") from None


class RabbitMQ(Broker):
    name = "rabbitmq"
    label = "RabbitMQ"
    sasl = ["--sasl", "plain", "--user", "guest", "--password", "guest"]

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.epmd: subprocess.Popen | None = None

    # RabbitMQ 3.10's AMQP 1.0 plugin (v1 address format):
    #   /queue/NAME   declares queue NAME and publishes to it through the default exchange.  The declaration
    #                 takes `durable` from the terminus durability: non-zero -> a durable, shared queue; zero ->
    #                 on a target an exclusive auto-delete queue, so both links must ask for durability.
    #   /amq/queue/NAME  an existing queue, never declared.
    #   /topic/KEY    target: publish to amq.topic with routing key KEY; source: a new server-named queue bound
    #                 to amq.topic with KEY per receiving link, so every receiver gets every message (fan-out).
    #   /exchange/X[/KEY]  publish to exchange X / consume through a private queue bound to X.
    def queue_args(self) -> list[str]:
        return ["--address", "/queue/bench.q", "--terminus-durable", "configuration"]

    def topic_args(self, run_id: str) -> list[str]:
        # a fresh routing key per run: the plugin leaves the receivers' queues behind (not auto-delete)
        return ["--address", f"/topic/bench.t.{run_id}"]

    def start(self) -> None:
        if not RABBIT_SERVER.exists():
            raise RuntimeError(f"{RABBIT_SERVER} missing (package rabbitmq-server)")
        w = self.workdir
        for d in ("mnesia", "log", "home"):
            (w / d).mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        dist_port = free_port()
        epmd_port = free_port()
        node = f"subgatebench{os.getpid()}@localhost"
        (w / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = 127.0.0.1:{self.port}\n"
            "listeners.ssl = none\n"
            "log.console = false\n"
            "log.file.level = warning\n"
            "loopback_users.guest = true\n"
        )
        (w / "enabled_plugins").write_text("[rabbitmq_amqp1_0].\n")
        (w / "rabbitmq-env.conf").write_text("")  # so /etc/rabbitmq/rabbitmq-env.conf is not read
        epmd_env = dict(os.environ, ERL_EPMD_PORT=str(epmd_port), ERL_EPMD_ADDRESS="127.0.0.1")
        env = dict(
            epmd_env,
            HOME=str(w / "home"),  # the Erlang cookie goes here
            RABBITMQ_NODENAME=node,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(dist_port),
            RABBITMQ_CONF_ENV_FILE=str(w / "rabbitmq-env.conf"),
            RABBITMQ_CONFIG_FILE=str(w / "rabbitmq.conf"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(w / "advanced.config"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(w / "enabled_plugins"),
            RABBITMQ_MNESIA_BASE=str(w / "mnesia"),
            RABBITMQ_LOG_BASE=str(w / "log"),
            RABBITMQ_LOGS=str(w / "log" / "rabbit.log"),
            RABBITMQ_PID_FILE=str(w / "rabbit.pid"),
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
        )
        self.version = "RabbitMQ " + dpkg_version("rabbitmq-server") + ", Erlang " + dpkg_version("erlang-base")
        # Our own epmd on a private port, as our child, so the node registers nowhere else and nothing outlives us.
        epmd = shutil.which("epmd") or "/usr/bin/epmd"
        self.epmd = subprocess.Popen(
            [epmd, "-port", str(epmd_port), "-address", "127.0.0.1"],
            env=epmd_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        out = open(self.logfile, "wb")
        self.proc = subprocess.Popen([str(RABBIT_SERVER)], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=w)
        try:
            wait_port(self.port, self.proc, 120)
        except RuntimeError as e:
            self.stop()
            raise RuntimeError(f"{e}: {tail(self.logfile)} {tail(w / 'log' / 'rabbit.log')}") from None

    def stop(self) -> None:
        super().stop()
        if self.epmd is not None and self.epmd.poll() is None:
            self.epmd.terminate()
            try:
                self.epmd.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.epmd.kill()
                self.epmd.wait(timeout=10)


class Subgate(Broker):
    name = "subgate"
    label = "subgate"

    def __init__(self, workdir: Path, exe: str, store: str, extra: list[str], log_name: str = "") -> None:
        super().__init__(workdir)
        self.exe = exe
        self.store_template = store
        self.store = store.replace("{tmpdir}", str(workdir))
        self.extra = extra
        if log_name:
            self.logfile = workdir / log_name

    def queue_args(self) -> list[str]:
        return ["--address", "bench.q", "--cap", "queue"]

    def topic_args(self, run_id: str) -> list[str]:
        return ["--address", "bench.t", "--cap", "topic"]

    def subscription_args(self) -> list[str]:
        """A JMS durable subscription `sub1` of ClientID `bench-client` on topic bench.ds (loadgen --sub)."""
        return ["--address", "bench.ds", "--cap", "topic", "--client-id", "bench-client", "--sub", "sub1"]

    def start(self) -> None:
        if not Path(self.exe).exists() and not shutil.which(self.exe):
            raise RuntimeError(f"{self.exe} not found")
        py = Path(self.exe).parent / "python"
        self.version = "subgate on " + (
            subprocess.run(
                [str(py), "-c", "import sys; print(sys.executable, sys.version.split()[0])"],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            ).stdout.strip()
            if py.exists()
            else "?"
        )
        cmd = [self.exe, "serve", "--listen", "127.0.0.1:0", "--store", self.store, "--migrate", *self.extra]
        shown = [*cmd[:5], self.store_template.replace("{tmpdir}", "<tmpdir>"), *cmd[6:]]
        self.command = " ".join(shlex.quote(c) for c in shown)
        out = open(self.logfile, "wb")
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, cwd=self.workdir)
        found = threading.Event()
        pattern = re.compile(rb"listening on (?:127\.0\.0\.1|\[?[0-9a-fA-F:.]+\]?):(\d+)")

        def pump() -> None:  # copy stderr to the log file, watching for the listening line
            assert self.proc is not None and self.proc.stderr is not None
            for line in self.proc.stderr:
                out.write(line)
                out.flush()
                if not found.is_set():
                    m = pattern.search(line)
                    if m:
                        self.port = int(m.group(1))
                        found.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + 60
        while not found.wait(0.2):
            if self.proc.poll() is not None:
                time.sleep(0.3)  # let the pump copy the last lines
                raise RuntimeError(f"exited with code {self.proc.returncode}: {tail(self.logfile, 3)}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"no 'listening on' line within 60 s: {tail(self.logfile, 3)}")
        wait_port(self.port, self.proc, 30)


class PgCluster:
    """A throwaway PostgreSQL cluster (initdb into a temp dir, 127.0.0.1 on a free port, fsync on), run as the
    `postgres` system user when we are root (PostgreSQL refuses to run as root); stopped by its postmaster PID."""

    def __init__(self) -> None:
        self.root: Path | None = None
        self.port = 0
        self.pid = 0
        self.version = ""

    @staticmethod
    def bindir() -> Path:
        dirs = sorted(
            Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(re.sub(r"\D", "", p.parent.name) or 0)
        )
        for d in reversed(dirs):
            if (d / "initdb").exists() and (d / "pg_ctl").exists():
                return d
        raise RuntimeError(
            "PostgreSQL server binaries not found under /usr/lib/postgresql (apt-get install postgresql)"
        )

    def _run(self, argv: list[str], timeout: float = 120) -> None:
        prefix: list[str] = []
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", LANG="C", TZ="UTC")
        if os.geteuid() == 0:
            prefix = ["runuser", "-u", "postgres", "--"]
            env["HOME"] = str(self.root)
        r = subprocess.run(prefix + argv, cwd=self.root, env=env, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"{Path(argv[0]).name} failed: {(r.stderr or r.stdout).strip()[-300:]}")

    def start(self) -> str:
        bindir = self.bindir()
        self.version = "PostgreSQL " + bindir.parent.name
        self.root = Path(tempfile.mkdtemp(prefix="subgate-bench-pg-", dir="/tmp"))
        (self.root / "run").mkdir()
        if os.geteuid() == 0:
            import pwd

            pw = pwd.getpwnam("postgres")
            for d in (self.root, self.root / "run"):
                os.chown(d, pw.pw_uid, pw.pw_gid)
        data = self.root / "data"
        self._run(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ]
        )
        self.port = free_port()
        with open(data / "postgresql.conf", "a") as f:
            f.write(
                f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.root / 'run'}'\n"
                "fsync = on\nsynchronous_commit = on\nshared_buffers = 128MB\nmax_connections = 50\n"
                "logging_collector = off\n"
            )
        self._run([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(self.root / "pg.log"), "-w", "-t", "60", "start"])
        self.pid = int((data / "postmaster.pid").read_text().split()[0])
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGINT)  # fast shutdown
            except OSError:
                pass
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and Path(f"/proc/{self.pid}").exists():
                time.sleep(0.1)
            if Path(f"/proc/{self.pid}").exists():
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass
            self.pid = 0
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None


class SubgatePG(Subgate):
    """subgate with its store in a throwaway PostgreSQL cluster (started and stopped with the broker)."""

    name = "subgate-pg"
    label = "subgate (PostgreSQL)"

    def __init__(self, workdir: Path, exe: str, extra: list[str]) -> None:
        super().__init__(workdir, exe, "", extra)
        self.pg = PgCluster()

    def start(self) -> None:
        self.store = self.store_template = self.pg.start()
        try:
            super().start()
        except BaseException:
            self.pg.stop()
            raise
        self.version += f"; store {self.pg.version} (fsync on, synchronous_commit on)"

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self.pg.stop()


def dpkg_version(pkg: str) -> str:
    r = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", pkg], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    return r.stdout.strip() or "?"


# ---------------------------------------------------------------------------------------------- scenarios


def loadgen(broker: Broker, mode: str, args: list[str], timeout: float) -> dict:
    cmd = [str(LOADGEN), mode, "--port", str(broker.port), *broker.sasl, "--timeout", str(int(timeout)), *args]
    log(f"  {broker.name}: {' '.join(cmd[1:])}")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": "loadgen did not exit"}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"ok": False, "error": f"loadgen exit {r.returncode}: {r.stderr.strip()[-300:]}"}
    res = json.loads(lines[-1])
    res["exit_code"] = r.returncode
    if r.returncode != 0:
        res["ok"] = False
        res.setdefault("error", r.stderr.strip()[-300:])
    return res


def measured(broker: Broker, mode: str, args: list[str], timeout: float, per: str) -> dict:
    """Run loadgen while measuring the broker's CPU and RSS; `per` names the result field to divide CPU by."""
    if broker.proc is not None and broker.proc.poll() is not None:
        return {"ok": False, "error": f"broker exited with code {broker.proc.returncode}"}
    cpu0 = cpu_seconds(broker.tree())
    with RssSampler(broker.pid) as rss:
        res = loadgen(broker, mode, args, timeout)
    cpu = cpu_seconds(broker.tree()) - cpu0
    res["broker_cpu_seconds"] = round(cpu, 3)
    n = res.get(per) or 0
    res["broker_cpu_us_per_msg"] = round(cpu / n * 1e6, 1) if n else None
    res["broker_peak_rss_mb"] = round(rss.peak_kb / 1024, 1)
    if not res.get("ok"):
        log(f"  {broker.name} {mode}: FAILED: {res.get('error')}")
    else:
        rate = res.get("deliveries_per_sec") or res.get("msgs_per_sec")
        extra = f" p50={res['p50_us']}us p99={res['p99_us']}us" if mode == "latency" else ""
        log(f"  {broker.name} {mode}: {rate:.0f}/s{extra} cpu={res['broker_cpu_us_per_msg']}us/msg")
    return res


def durable_run(broker: Broker, target: list[str], source: list[str], args: list[str], tmo: float, note: str) -> dict:
    """N durable messages sent (each `accepted` counted), then the N drained from `source`."""
    send = measured(broker, "send", [*target, *args, "--durable"], tmo, "accepted")
    drain = (
        measured(broker, "recv", [*source, *args], tmo, "received")
        if send.get("ok")
        else {"ok": False, "error": "not run: the send half failed"}
    )
    return {"send": send, "drain": drain, "note": note}


def run_broker(broker: Broker, opts: argparse.Namespace, run_id: str) -> dict:
    out: dict = {"label": broker.label, "available": False, "scenarios": {}}
    log(f"starting {broker.name}")
    t0 = time.monotonic()
    try:
        broker.start()
    except Exception as e:  # noqa: BLE001 - any failure to start is reported, and the run goes on
        out["reason"] = str(e)
        log(f"{broker.name}: not available ({e})")
        return out
    out.update(available=True, version=broker.version, port=broker.port, pid=broker.pid)
    if isinstance(broker, Subgate):
        out["command"] = broker.command
        out["store"] = broker.store
    log(f"{broker.name} up on 127.0.0.1:{broker.port} (pid {broker.pid}) after {time.monotonic() - t0:.1f} s")
    n, size, window = opts.count, opts.size, opts.window
    common = ["--size", str(size), "--window", str(window)]
    q = broker.queue_args()
    tmo = opts.scenario_timeout
    sc = out["scenarios"]
    scenarios = opts.pg_scenarios if isinstance(broker, SubgatePG) else opts.scenarios
    try:
        if opts.warmup:
            w = loadgen(broker, "pair", [*q, *common, "--count", str(opts.warmup)], tmo)
            if not w.get("ok"):
                log(f"{broker.name}: warm-up failed: {w.get('error')}")
        if "S1" in scenarios:
            sc["S1"] = measured(broker, "pair", [*q, *common, "--count", str(n)], tmo, "received")
        if "S2" in scenarios:
            sc["S2"] = durable_run(broker, q, q, [*common, "--count", str(n)], tmo, broker.durable_note)
        if "S2T" in scenarios and isinstance(broker, Subgate):
            sub = broker.subscription_args()
            made = loadgen(broker, "subscribe", sub, tmo)  # attach once and leave: the subscription stays, idle
            if made.get("ok"):
                publish = ["--address", sub[1], "--cap", "topic"]
                sc["S2T"] = durable_run(broker, publish, sub, [*common, "--count", str(n)], tmo, "")
            else:
                sc["S2T"] = {"send": made, "drain": {"ok": False, "error": "not run"}, "note": "subscribe failed"}
        if "S3" in scenarios:
            if not broker.topic_supported:
                sc["S3"] = {
                    "ok": False,
                    "na": True,
                    "error": "n/a: no topic fan-out (every address is a competing-consumer queue)",
                }
            else:
                args = [*broker.topic_args(run_id), *common, "--count", str(opts.fanout_count)]
                args += ["--receivers", str(opts.receivers)]
                sc["S3"] = measured(broker, "fanout", args, tmo, "deliveries")
        if "S4" in scenarios:
            args = [*q, *common, "--count", str(opts.latency_count), "--warmup", str(opts.latency_warmup)]
            sc["S4"] = measured(broker, "latency", args, tmo, "samples")
        out["peak_vmhwm_mb"] = round(broker.peak_hwm_kb() / 1024, 1)
    finally:
        log(f"stopping {broker.name} (pid {broker.pid})")
        broker.stop()
        out["exit_code"] = broker.proc.returncode if broker.proc else None
        out["log"] = str(broker.logfile)
    return out


def current_rss_mb(broker: Broker) -> float:
    return round(sum(status_kb(p, "VmRSS") for p in broker.tree()) / 1024, 1)


def memory_run(opts: argparse.Namespace, workdir: Path) -> dict:
    """--memory: K idle durable subscriptions (each on its own topic) plus one durable subscription with a
    backlog of N messages; then a restart (time to accepting connections) and a drain of the backlog, with the
    broker's RSS sampled throughout. subgate on SQLite only."""
    k, n = opts.memory_idle, opts.memory_backlog
    tmo = max(600.0, n / 200)
    extra = shlex.split(opts.subgate_args)
    res: dict = {"idle": k, "backlog": n, "ok": False}
    sub = ["--address", "bench.mem", "--cap", "topic", "--client-id", "bench-client", "--sub", "mem"]
    common = ["--size", str(opts.size), "--window", str(opts.window)]
    log(f"memory scenario: {k:,} idle durable subscriptions, {n:,} messages of backlog")
    fill_broker = Subgate(workdir, opts.subgate, opts.subgate_store, extra, log_name="subgate-fill.log")
    try:
        fill_broker.start()
    except Exception as e:  # noqa: BLE001
        res["error"] = f"subgate not available: {e}"
        return res
    try:
        idle_args = ["--address", "bench.idle", "--cap", "topic", "--client-id", "bench-idle", "--sub", "idle"]
        res["subscribe_idle"] = loadgen(fill_broker, "subscribe", [*idle_args, "--receivers", str(k)], tmo)
        res["subscribe_backlog"] = loadgen(fill_broker, "subscribe", sub, tmo)
        res["fill"] = measured(
            fill_broker, "send", [*sub[:4], *common, "--count", str(n), "--durable"], tmo, "accepted"
        )
        res["rss_after_fill_mb"] = current_rss_mb(fill_broker)
    finally:
        fill_broker.stop()
    if not all(res[x].get("ok") for x in ("subscribe_idle", "subscribe_backlog", "fill")):
        res["error"] = "filling the backlog failed"
        return res
    broker = Subgate(workdir, opts.subgate, opts.subgate_store, extra, log_name="subgate-restart.log")
    t0 = time.monotonic()
    try:
        broker.start()
    except Exception as e:  # noqa: BLE001
        res["error"] = f"restart failed: {e}"
        return res
    res["startup_seconds"] = round(time.monotonic() - t0, 2)
    try:
        res["rss_after_start_mb"] = current_rss_mb(broker)
        res["drain"] = measured(broker, "recv", [*sub, *common, "--count", str(n)], tmo, "received")
        res["rss_after_drain_mb"] = current_rss_mb(broker)
    finally:
        broker.stop()
    peaks = [
        res["fill"].get("broker_peak_rss_mb") or 0,
        res["rss_after_start_mb"],
        res["drain"].get("broker_peak_rss_mb") or 0,
    ]
    res["peak_rss_mb"] = max(peaks)
    res["ok"] = bool(res["drain"].get("ok"))
    return res


def memory_lines(m: dict) -> list[str]:
    if m.get("error"):
        return [f"Memory scenario failed: {m['error']}"]
    head = ["phase", "msgs/s", "peak RSS MiB (sampled every 0.2 s)", "RSS at the end MiB", "note"]
    rows = [
        [
            "fill: send the backlog (durable, to the topic)",
            cell(m["fill"], "msgs_per_sec"),
            fmt(m["fill"].get("broker_peak_rss_mb"), 1),
            fmt(m.get("rss_after_fill_mb"), 1),
            "",
        ],
        [
            "restart: to accepting connections",
            "–",
            fmt(m.get("rss_after_start_mb"), 1),
            fmt(m.get("rss_after_start_mb"), 1),
            f"{m['startup_seconds']:.2f} s",
        ],
        [
            "drain the backlog",
            cell(m["drain"], "msgs_per_sec"),
            fmt(m["drain"].get("broker_peak_rss_mb"), 1),
            fmt(m.get("rss_after_drain_mb"), 1),
            m["drain"].get("error", ""),
        ],
    ]
    return md_table(head, rows)


# ---------------------------------------------------------------------------------------------- reporting


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def fmt(x: object, digits: int = 0) -> str:
    if x is None:
        return "–"
    if isinstance(x, (int, float)):
        return f"{x:,.{digits}f}"
    return str(x)


def cell(res: dict | None, key: str, digits: int = 0) -> str:
    if res is None:
        return "not run"
    if not res.get("ok"):
        return "n/a" if res.get("na") else "failed"
    return fmt(res.get(key), digits)


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a and b else "n/a"


def scenario_rows(results: dict, sid: str) -> tuple[list[str], list[list[str]], dict[str, float | None]]:
    """Header, rows and the headline metric per broker for one scenario."""
    headline: dict[str, float | None] = {}
    rows = []
    if sid == "S1":
        head = ["broker", "msgs/s end-to-end", "broker CPU µs/msg", "broker peak RSS MiB", "note"]
    elif sid in ("S2", "S2T"):
        head = [
            "broker",
            "send msgs/s (accepted)",
            "drain msgs/s",
            "CPU µs/msg send",
            "CPU µs/msg drain",
            "peak RSS MiB",
            "note",
        ]
    elif sid == "S3":
        head = ["broker", "deliveries/s", "publish msgs/s", "broker CPU µs/delivery", "broker peak RSS MiB", "note"]
    else:
        head = ["broker", "p50 µs", "p99 µs", "mean µs", "broker CPU µs/round trip", "note"]
    for name, b in results.items():
        label = b["label"]
        if not b["available"]:
            rows.append([label] + ["–"] * (len(head) - 2) + [f"not available ({b.get('reason', '?')})"])
            headline[name] = None
            continue
        r = b["scenarios"].get(sid)
        if r is None:
            if sid != "S2T" and name != "subgate-pg":  # those two run only some scenarios by design
                rows.append([label] + ["not run"] * (len(head) - 2) + [""])
            headline[name] = None
            continue
        if sid in ("S2", "S2T"):
            s, d = r["send"], r["drain"]
            errs = "; ".join(x.get("error", "") for x in (s, d) if not x.get("ok"))
            rows.append(
                [
                    label,
                    cell(s, "msgs_per_sec"),
                    cell(d, "msgs_per_sec"),
                    cell(s, "broker_cpu_us_per_msg", 1),
                    cell(d, "broker_cpu_us_per_msg", 1),
                    fmt(max(s.get("broker_peak_rss_mb") or 0, d.get("broker_peak_rss_mb") or 0), 1),
                    "; ".join(x for x in (r.get("note"), errs) if x),
                ]
            )
            headline[name] = s.get("msgs_per_sec") if s.get("ok") else None
            headline[name + ":drain"] = d.get("msgs_per_sec") if d.get("ok") else None
            continue
        note = "" if r.get("ok") else r.get("error", "")
        if sid == "S1":
            rows.append(
                [
                    label,
                    cell(r, "msgs_per_sec"),
                    cell(r, "broker_cpu_us_per_msg", 1),
                    cell(r, "broker_peak_rss_mb", 1),
                    note,
                ]
            )
            headline[name] = r.get("msgs_per_sec") if r.get("ok") else None
        elif sid == "S3":
            pub = None
            if r.get("ok") and r.get("seconds"):
                pub = r["count"] / r["seconds"]
            rows.append(
                [
                    label,
                    cell(r, "deliveries_per_sec"),
                    fmt(pub) if r.get("ok") else cell(r, "x"),
                    cell(r, "broker_cpu_us_per_msg", 1),
                    cell(r, "broker_peak_rss_mb", 1),
                    note,
                ]
            )
            headline[name] = r.get("deliveries_per_sec") if r.get("ok") else None
        else:
            rows.append(
                [
                    label,
                    cell(r, "p50_us", 1),
                    cell(r, "p99_us", 1),
                    cell(r, "mean_us", 1),
                    cell(r, "broker_cpu_us_per_msg", 1),
                    note,
                ]
            )
            headline[name] = r.get("p50_us") if r.get("ok") else None
            headline[name + ":p99"] = r.get("p99_us") if r.get("ok") else None
    return head, rows, headline


SUBGATES = ("subgate", "subgate-pg")
PEERS = ("activemq", "rabbitmq", "proton-c", "proton-example")


def value(results: dict, broker: str, sid: str, *path: str) -> float | None:
    """One figure of one broker's scenario (None if it did not run or failed)."""
    b = results.get(broker)
    if not b or not b.get("available"):
        return None
    r = b["scenarios"].get(sid)
    for key in path[:-1]:
        r = r.get(key) if r else None
    if not r or not r.get("ok"):
        return None
    return r.get(path[-1])


def ratio_lines(sid: str, h: dict[str, float | None], results: dict) -> list[str]:
    out = []
    for sg in SUBGATES:
        b = results.get(sg)
        if b is None:
            continue
        if not b["available"]:
            out.append(f"- {sg}/peers: n/a ({sg} not available: {b.get('reason', '?')})")
            continue
        if sid not in b["scenarios"]:
            continue
        for peer in PEERS:
            if peer not in results:
                continue
            lbl = f"{sg}/{peer}"
            if sid in ("S2", "S2T"):
                # S2T is compared with the peer's S2 (a durable queue): the figure the issue sets as the bar
                send = ratio(
                    value(results, sg, sid, "send", "msgs_per_sec"), value(results, peer, "S2", "send", "msgs_per_sec")
                )
                drain = ratio(
                    value(results, sg, sid, "drain", "msgs_per_sec"),
                    value(results, peer, "S2", "drain", "msgs_per_sec"),
                )
                out.append(f"- {lbl}{' S2' if sid == 'S2T' else ''}: send {send}, drain {drain}")
            elif sid == "S4":
                out.append(
                    f"- {lbl}: p50 {ratio(h.get(sg), h.get(peer))}, "
                    f"p99 {ratio(h.get(sg + ':p99'), h.get(peer + ':p99'))} (round trip; lower is better)"
                )
            else:
                r = ratio(h.get(sg), h.get(peer))
                out.append(f"- {lbl}: {r}" + (" (throughput; higher is better)" if r != "n/a" else ""))
    return out


# The targets of the performance issues: (what, subgate figure, peer figure, comparison, bound). Issue 34 first
# (ActiveMQ and the C broker), then the older ones of issue 5 (RabbitMQ and the Python example broker).
TARGETS = [
    ("S1 queue: ≥ 1.0× ActiveMQ", ("subgate", "S1", "msgs_per_sec"), ("activemq", "S1", "msgs_per_sec"), ">=", 1.0),
    ("S1 queue: ≥ 0.6× proton C", ("subgate", "S1", "msgs_per_sec"), ("proton-c", "S1", "msgs_per_sec"), ">=", 0.6),
    (
        "S3 fan-out to 10: ≥ 1.2× ActiveMQ",
        ("subgate", "S3", "deliveries_per_sec"),
        ("activemq", "S3", "deliveries_per_sec"),
        ">=",
        1.2,
    ),
    (
        "S2 send, SQLite: ≥ 1.5× RabbitMQ S2",
        ("subgate", "S2", "send", "msgs_per_sec"),
        ("rabbitmq", "S2", "send", "msgs_per_sec"),
        ">=",
        1.5,
    ),
    (
        "S2 send, SQLite: ≥ 5× ActiveMQ S2",
        ("subgate", "S2", "send", "msgs_per_sec"),
        ("activemq", "S2", "send", "msgs_per_sec"),
        ">=",
        5.0,
    ),
    ("S4 round trip p50: ≤ 1.2× proton C", ("subgate", "S4", "p50_us"), ("proton-c", "S4", "p50_us"), "<=", 1.2),
    (
        "S2 queue, PostgreSQL: ≥ 1.0× RabbitMQ S2",
        ("subgate-pg", "S2", "send", "msgs_per_sec"),
        ("rabbitmq", "S2", "send", "msgs_per_sec"),
        ">=",
        1.0,
    ),
    (
        "S2T durable sub, SQLite: ≥ 1.0× RabbitMQ S2",
        ("subgate", "S2T", "send", "msgs_per_sec"),
        ("rabbitmq", "S2", "send", "msgs_per_sec"),
        ">=",
        1.0,
    ),
    (
        "S2T durable sub, PostgreSQL: ≥ 1.0× RabbitMQ S2",
        ("subgate-pg", "S2T", "send", "msgs_per_sec"),
        ("rabbitmq", "S2", "send", "msgs_per_sec"),
        ">=",
        1.0,
    ),
    (
        "S3 fan-out to 10: ≥ 1.0× RabbitMQ",
        ("subgate", "S3", "deliveries_per_sec"),
        ("rabbitmq", "S3", "deliveries_per_sec"),
        ">=",
        1.0,
    ),
    ("S4 round trip p50: ≤ 1.5× RabbitMQ", ("subgate", "S4", "p50_us"), ("rabbitmq", "S4", "p50_us"), "<=", 1.5),
    ("S1: ≥ 3× proton example", ("subgate", "S1", "msgs_per_sec"), ("proton-example", "S1", "msgs_per_sec"), ">=", 3.0),
]


def target_rows(results: dict, memory: dict | None) -> list[list[str]]:
    rows = []
    for what, mine, peer, op, bound in TARGETS:
        a, b = value(results, *mine), value(results, *peer)
        if a is None or b is None:
            if mine[0] in results or peer[0] in results:
                rows.append([what, fmt(a, 1), fmt(b, 1), "n/a", "not measured"])
            continue
        r = a / b
        met = r >= bound if op == ">=" else r <= bound
        rows.append([what, fmt(a, 1), fmt(b, 1), f"{r:.2f}×", "met" if met else "NOT met"])
    if memory is not None:
        rss, limit = memory.get("peak_rss_mb"), 500.0
        rows.append(
            [
                f"memory ({memory['idle']:,} idle subs, {memory['backlog']:,} backlog): RSS < 500 MB",
                fmt(rss, 1) + " MB" if rss else "–",
                "–",
                "–",
                "met" if rss and rss < limit and memory.get("ok") else "NOT met",
            ]
        )
        up = memory.get("startup_seconds")
        rows.append(
            [
                "start-up with that backlog: < 10 s",
                fmt(up, 2) + " s" if up else "–",
                "–",
                "–",
                "met" if up and up < 10 else "NOT met",
            ]
        )
    return rows


def md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
    return lines


def text_table(head: list[str], rows: list[list[str]]) -> str:
    cols = [head] + rows
    width = [min(max(len(r[i]) for r in cols), 60) for i in range(len(head))]
    out = []
    for i, r in enumerate(cols):
        out.append("  ".join(c[:60].ljust(width[j]) for j, c in enumerate(r)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in width))
    return "\n".join(out)


def machine_note() -> dict:
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "memory": mem,
        "kernel": platform.release(),
        "runner_python": f"{sys.executable} {platform.python_version()}",
        "proton_c": dpkg_version("libqpid-proton11-dev"),
    }


def section_head(report: dict, begin: str, script: str, markers: str) -> list[str]:
    """The first lines of a generated section of docs/performance.md: its marker, whose it is, when, and the
    exact command (shared by bench/run.py and bench/bookmarks.py)."""
    return [
        begin,
        f"<!-- generated by bench/{script}; everything between the {markers} markers is rewritten on each run -->",
        "",
        f"### Latest run: {report['date']}",
        "",
        "Command (from the repository root):",
        "",
        "```",
        report["command"],
        "```",
        "",
    ]


def render_section(report: dict) -> str:
    m = report["machine"]
    o = report["options"]
    L = [
        *section_head(report, BEGIN, "run.py", "bench"),
        f"Machine: {m['nproc']} cores ({m['cpu']}), {m['memory']} RAM, Linux {m['kernel']}; runner "
        f"{m['runner_python']}; Proton-C {m['proton_c']}; wall time {duration(report['wall_seconds'])}. "
        "Shared, noisy machine: compare the ratios within one run, not absolute figures across runs."
        + (
            f" Every figure is the median of {o['repeat']} rounds (each round starts every broker afresh; the order "
            "of the brokers rotates from round to round)."
            if o.get("repeat", 1) > 1
            else ""
        ),
        "",
        f"Sizes: {o['count']:,} messages for S1/S2, {o['fanout_count']:,} messages × {o['receivers']} receivers "
        f"for S3, {o['latency_count']:,} round trips (after {o['latency_warmup']:,} warm-up) for S4; "
        f"{o['size']} B bodies, window {o['window']}. Broker CPU = utime+stime of the broker's process tree "
        "during the scenario divided by the messages (S3: by deliveries; S4: by round trips).",
        "",
        "Brokers:",
        "",
    ]
    for b in report["brokers"].values():
        if b["available"]:
            extra = f" — `{b['command']}`" if b.get("command") else ""
            L.append(f"- {b['label']}: {b.get('version', '')}{extra}")
        else:
            L.append(f"- {b['label']}: not available ({b.get('reason', '?')})")
    L.append("")
    for sid in SCENARIOS:
        if sid not in o["scenarios"] and sid not in o["pg_scenarios"]:
            continue
        head, rows, h = scenario_rows(report["brokers"], sid)
        L += [f"#### {SCENARIO_TITLES[sid]}", ""] + md_table(head, rows) + [""]
        rl = ratio_lines(sid, h, report["brokers"])
        if rl:
            L += rl + [""]
    mem = report.get("memory")
    if mem is not None:
        L += (
            [
                f"#### Memory and start-up — {mem['idle']:,} idle durable subscriptions and a backlog of "
                f"{mem['backlog']:,} messages on one more (subgate, SQLite)",
                "",
            ]
            + memory_lines(mem)
            + [""]
        )
    L += ["#### Targets (issues 34 and 5)", ""]
    L += md_table(["target", "subgate", "peer", "ratio", "verdict"], target_rows(report["brokers"], mem)) + [""]
    L.append(END)
    return "\n".join(L)


def update_doc(section: str) -> None:
    DOC.parent.mkdir(parents=True, exist_ok=True)
    if DOC.exists():
        text = DOC.read_text()
    else:
        text = (
            "# Performance\n\n"
            "Benchmarks of subgate against RabbitMQ 3.10 (AMQP 1.0 plugin) and proton's Python example broker,\n"
            "driven by the C load client in `bench/`. How to run them and what each scenario means: "
            "`bench/README.md`.\n\n"
        )
    DOC.write_text(with_section(text, BEGIN, END, section, "## Benchmark results"))


def with_section(text: str, begin: str, end: str, section: str, heading: str) -> str:
    """``text`` with its generated part (from the ``begin`` marker through the ``end`` marker) replaced by
    ``section``, or, the first time, ``section`` appended under ``heading``."""
    b, e = text.find(begin), text.find(end)
    if b != -1 and e > b:
        return text[:b] + section + text[e + len(end) :]
    return text.rstrip("\n") + f"\n\n{heading}\n\n" + section + "\n"


# ---------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=200_000, help="messages for S1 and S2 (default 200000)")
    p.add_argument("--fanout-count", type=int, help="messages published in S3 (default count/10, min 1000)")
    p.add_argument("--receivers", type=int, default=10, help="S3 receivers (default 10)")
    p.add_argument("--latency-count", type=int, help="S4 measured round trips (default count/20, 1000..10000)")
    p.add_argument("--latency-warmup", type=int, help="S4 unmeasured round trips first (default latency-count/10)")
    p.add_argument("--warmup", type=int, help="unmeasured send+receive before S1 (default count/20, max 5000)")
    p.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    p.add_argument("--window", type=int, default=1000, help="unsettled window / credit (default 1000)")
    p.add_argument(
        "--brokers",
        default="activemq,rabbitmq,proton-c,proton-example,subgate,subgate-pg",
        help="comma list, in run order",
    )
    p.add_argument(
        "--repeat", type=int, default=1, help="rounds over every broker, in rotated order; medians reported (1)"
    )
    p.add_argument(
        "--activemq-amqp-jar",
        default=os.environ.get("SUBGATE_BENCH_ACTIVEMQ_AMQP_JAR", str(ACTIVEMQ_AMQP_JAR)),
        help="the locally built activemq-amqp 5.17.2 jar (bench/README.md, 'ActiveMQ')",
    )
    p.add_argument("--scenarios", default="S1,S2,S2T,S3,S4", help="comma list of S1,S2,S2T,S3,S4")
    p.add_argument(
        "--pg-scenarios", default="S2,S2T", help="scenarios of subgate-pg (subgate on PostgreSQL) (default S2,S2T)"
    )
    p.add_argument(
        "--memory", action="store_true", help="also run the memory/start-up scenario (slow: fills the backlog)"
    )
    p.add_argument("--memory-idle", type=int, default=10_000, help="idle durable subscriptions (10000)")
    p.add_argument("--memory-backlog", type=int, default=1_000_000, help="backlog messages (1000000)")
    p.add_argument("--subgate", default=str(REPO / ".venv" / "bin" / "subgate"), help="subgate executable")
    p.add_argument(
        "--subgate-store",
        default="sqlite:///{tmpdir}/bench.db",
        help="subgate --store URL; {tmpdir} is the broker's temp dir (default sqlite:///{tmpdir}/bench.db)",
    )
    p.add_argument("--subgate-args", default="", help="extra arguments for subgate serve, one string")
    p.add_argument("--example-python", default="/usr/bin/python3", help="interpreter for proton's example broker")
    p.add_argument("--scenario-timeout", type=float, help="deadline per loadgen run, seconds (default by count)")
    p.add_argument("--no-install", action="store_true", help="do not apt-get install missing packages")
    p.add_argument("--no-doc", action="store_true", help="do not rewrite docs/performance.md")
    p.add_argument("--keep-tmp", action="store_true", help="keep the brokers' temp dirs (logs, stores)")
    o = p.parse_args(argv)
    o.brokers = [b.strip() for b in o.brokers.split(",") if b.strip()]
    for b in o.brokers:
        if b not in ("activemq", "rabbitmq", "proton-c", "proton-example", "subgate", "subgate-pg"):
            p.error(f"unknown broker {b}")
    o.scenarios = [s.strip().upper() for s in o.scenarios.split(",") if s.strip()]
    o.pg_scenarios = [s.strip().upper() for s in o.pg_scenarios.split(",") if s.strip()]
    for s in o.scenarios + o.pg_scenarios:
        if s not in SCENARIOS:
            p.error(f"unknown scenario {s}")
    if o.fanout_count is None:
        o.fanout_count = max(o.count // 10, 1000)
    if o.latency_count is None:
        o.latency_count = min(max(o.count // 20, 1000), 10_000)
    if o.latency_warmup is None:
        o.latency_warmup = max(o.latency_count // 10, 100)
    if o.warmup is None:
        o.warmup = min(o.count // 20, 5000)
    if o.scenario_timeout is None:
        o.scenario_timeout = max(180.0, o.count / 250)  # a broker slower than 250 msgs/s counts as failed
    return o


def make_broker(name: str, w: Path, opts: argparse.Namespace) -> Broker:
    if name == "rabbitmq":
        return RabbitMQ(w)
    if name == "activemq":
        return ActiveMQ(w, Path(opts.activemq_amqp_jar))
    if name == "proton-c":
        return ProtonC(w)
    if name == "proton-example":
        return ProtonExample(w, opts.example_python)
    if name == "subgate-pg":
        return SubgatePG(w, opts.subgate, shlex.split(opts.subgate_args))
    return Subgate(w, opts.subgate, opts.subgate_store, shlex.split(opts.subgate_args))


def median(xs: list[float]) -> float:
    ys = sorted(xs)
    n = len(ys)
    return ys[n // 2] if n % 2 else (ys[n // 2 - 1] + ys[n // 2]) / 2


def median_result(runs: list[dict]) -> dict:
    """One scenario's result over several rounds: each number the median of the rounds that succeeded (nested
    send/drain halves likewise); `rounds` and `rounds_ok` say how many there were; a failed round's error kept."""
    ok = [r for r in runs if r.get("ok")]
    if "send" in runs[0]:  # S2/S2T: two halves
        return {
            "send": median_result([r["send"] for r in runs]),
            "drain": median_result([r["drain"] for r in runs]),
            "note": runs[0].get("note", ""),
        }
    if not ok:
        return dict(runs[-1], rounds=len(runs), rounds_ok=0)
    out = dict(ok[0], rounds=len(runs), rounds_ok=len(ok))
    for key, v in ok[0].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            vals = [r[key] for r in ok if isinstance(r.get(key), (int, float))]
            out[key] = round(median(vals), 3)
    out["per_round"] = [r.get("msgs_per_sec") or r.get("deliveries_per_sec") or r.get("p50_us") for r in runs]
    if len(ok) < len(runs):
        out["failed_rounds"] = [r.get("error", "") for r in runs if not r.get("ok")]
    return out


def median_run(runs: list[dict]) -> dict:
    """A broker's rounds folded into one result of the same shape as a single round's."""
    if len(runs) == 1:
        return runs[0]
    up = [r for r in runs if r["available"]]
    if not up:
        return runs[-1]
    out = dict(up[0], rounds=len(runs))
    out["scenarios"] = {}
    for sid in up[0]["scenarios"]:
        out["scenarios"][sid] = median_result([r["scenarios"][sid] for r in up if sid in r["scenarios"]])
    return out


def main(argv: list[str]) -> int:
    opts = parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the `finally` blocks stop the brokers we started
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    started = dt.datetime.now().astimezone()
    command = "python3 bench/run.py" + ("" if not argv else " " + " ".join(shlex.quote(a) for a in argv))
    if not opts.no_install:
        ensure_packages()
    build_loadgen()
    if "proton-c" in opts.brokers:
        build_proton_c_broker()
    run_id = started.strftime("%Y%m%d%H%M%S")
    tmp_root = Path(tempfile.mkdtemp(prefix="subgate-bench-"))
    log(f"temp dir {tmp_root}")
    results: dict = {}
    memory: dict | None = None
    try:
        rounds: dict[str, list[dict]] = {name: [] for name in opts.brokers}
        for rnd in range(opts.repeat):
            k = rnd % len(opts.brokers)  # rotate the order, so no broker always runs first (or last)
            for name in opts.brokers[k:] + opts.brokers[:k]:
                w = tmp_root / f"{name}-{rnd}"
                w.mkdir()
                if opts.repeat > 1:
                    log(f"round {rnd + 1}/{opts.repeat}: {name}")
                rounds[name].append(run_broker(make_broker(name, w, opts), opts, f"{run_id}r{rnd}"))
        results = {name: median_run(rounds[name]) for name in opts.brokers}
        if opts.memory:
            w = tmp_root / "memory"
            w.mkdir()
            memory = memory_run(opts, w)
    finally:
        if not opts.keep_tmp:
            shutil.rmtree(tmp_root, ignore_errors=True)
    wall = time.monotonic() - T0
    report = {
        "date": started.isoformat(timespec="seconds"),
        "command": command,
        "wall_seconds": round(wall, 1),
        "machine": machine_note(),
        "options": {
            k: getattr(opts, k)
            for k in (
                "count",
                "fanout_count",
                "receivers",
                "latency_count",
                "latency_warmup",
                "warmup",
                "size",
                "window",
                "brokers",
                "scenarios",
                "pg_scenarios",
                "memory_idle",
                "memory_backlog",
                "subgate",
                "subgate_store",
                "subgate_args",
                "example_python",
                "repeat",
            )
        },
        "brokers": results,
        "memory": memory,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{started.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")

    print()
    for sid in SCENARIOS:
        if sid not in opts.scenarios and sid not in opts.pg_scenarios:
            continue
        head, rows, h = scenario_rows(results, sid)
        print(SCENARIO_TITLES[sid])
        print(text_table(head, rows))
        for line in ratio_lines(sid, h, results):
            print("  " + line[2:])
        print()
    if memory is not None:
        print("Memory and start-up (subgate, SQLite)")
        print("\n".join(memory_lines(memory)))
        print()
    print("Targets (issues 34 and 5)")
    print(text_table(["target", "subgate", "peer", "ratio", "verdict"], target_rows(results, memory)))
    print()
    print(f"results: {out}")
    if not opts.no_doc:
        update_doc(render_section(report))
        print(f"updated: {DOC}")
    print(f"wall time: {duration(wall)}")
    peers_ok = any(b["available"] for n, b in results.items() if n != "subgate")
    return 0 if peers_ok or not [b for b in opts.brokers if b != "subgate"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
