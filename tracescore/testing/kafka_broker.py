"""A real single-node Apache Kafka 4.x broker (KRaft, combined broker+controller) for dev, tests and demos.

The broker's jars come from Maven Central through the machine's Maven into a cache outside the repo
(`_kafka_jars.py`), so the first start downloads (seconds on a fast link) and every later start only formats
storage and launches the JVM. Nothing here is a fake: it is the Apache Kafka server, `kafka.Kafka`, on a free
loopback port.

    python -m tracescore.testing.kafka_broker start   # prints the bootstrap address, leaves it running
    python -m tracescore.testing.kafka_broker stop

A `KafkaBroker` ends with the process that started it, whatever kills that process (`guarded`, `Guard`): a
test run killed on a timeout leaves no JVM behind. Only `start` above leaves its broker running on purpose.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import click

# The jars' fetching lives in _kafka_jars; its names stay importable from here.
from tracescore.testing._kafka_jars import CACHE_ROOT, KafkaUnavailable, fetch_kafka_jars
from tracescore.testing._kafka_jars import KAFKA_VERSION as KAFKA_VERSION
from tracescore.testing._kafka_jars import LOG4J_VERSION as LOG4J_VERSION
from tracescore.testing._process import STOP_S, Guard, end_process, free_port, locked, log_tail, wait_ready

__all__ = ["KafkaBroker", "KafkaUnavailable", "fetch_kafka_jars"]

STATE_DIR = CACHE_ROOT / "run" / "kafka"
_BIND_ATTEMPTS = 3

_LOG4J2 = """<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName="${{sys:kafka.logs.dir}}/server.log">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="{level}"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


def _kafka_uuid() -> str:
    # Kafka's own format (what StorageTool random-uuid prints): URL-safe base64 of a UUID, unpadded.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _cluster_id() -> str:
    # One in 64 starts with "-", so it must only ever be passed as `--cluster-id=<id>`, never as its own
    # argument.
    return _kafka_uuid()


def _directory_id() -> str:
    """A log directory's id as StorageTool writes it: Kafka's `Uuid.randomUuid()`, which never starts with
    "-"."""
    while (made := _kafka_uuid()).startswith("-"):
        pass
    return made


def _class_archive(java: str, libs: Path) -> Path:
    """Where the class archive of Kafka's jars in `libs` for this JVM lives: one per JVM build (an archive
    is only good for the JVM that wrote it), beside the jars."""
    binary = Path(java).resolve()
    build = hashlib.sha256(f"{binary}:{binary.stat().st_mtime_ns}:{binary.stat().st_size}".encode())
    return libs.parent / f"classes-{build.hexdigest()[:16]}.jsa"


def _formatted_cluster_id(data_dir: Path) -> str | None:
    """The cluster id a previous format wrote into `data_dir`, if it was formatted."""
    meta = data_dir / "data" / "meta.properties"
    with contextlib.suppress(OSError):
        for line in meta.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "cluster.id":
                return value.strip()
    return None


@dataclass
class KafkaBroker:
    """One broker process. Use as a context manager, or start()/close().

    stop() ends the process but keeps its data, cluster id and ports, so start() (or restart()) brings the
    same broker back at the same bootstrap address with every topic, message and committed offset. close()
    stops it for good and deletes a data directory the broker created itself.
    """

    data_dir: Path | None = None
    partitions: int = 3
    heap: str = "512m"
    log_level: str = "WARN"
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    # None: the id an existing data_dir was formatted with, else a new one; fixed from the first start on.
    cluster_id: str | None = None
    # Users (name -> password) of an extra SASL_PLAINTEXT listener on `sasl_port`, for tests of clients that
    # authenticate, with `sasl_mechanism` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512); None: no such listener.
    sasl_users: dict[str, str] | None = None
    sasl_mechanism: str = "PLAIN"
    sasl_port: int = field(default_factory=free_port)
    # The JVM ends when the process that started it dies without stopping it (SIGKILL, the OOM killer), and
    # a data directory the broker created goes as close() would delete it (`Guard`). False: it outlives its
    # starter, as `python -m tracescore.testing.kafka_broker start`'s must.
    guarded: bool = True
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    # (where this run's JVM writes its class archive, where the archive goes once whole): see _launch
    _archive_dump: tuple[Path, Path] | None = field(default=None, init=False)
    _guard: Guard | None = field(default=None, init=False)
    _owns_data_dir: bool = field(default=False, init=False)
    _started: bool = field(default=False, init=False)  # once started, its ports are its address for good

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    def start(self, timeout_s: float = 60.0) -> KafkaBroker:
        for attempt in range(_BIND_ATTEMPTS):
            try:
                self._launch(timeout_s)
            except KafkaUnavailable as exc:
                # A port chosen free was taken before the JVM bound it (another program, a parallel test
                # worker). Before the first start the address is nobody's yet: choose again. After it, a
                # restart must come back at the same address, so it fails.
                if self._started or attempt == _BIND_ATTEMPTS - 1 or "Address already in use" not in str(exc):
                    raise
                self.port, self.controller_port, self.sasl_port = free_port(), free_port(), free_port()
            else:
                self._started = True
                return self
        raise AssertionError("unreachable")

    def _launch(self, timeout_s: float) -> None:
        libs = fetch_kafka_jars()
        java = (
            shutil.which("java", path=str(Path(os.environ["JAVA_HOME"]) / "bin"))
            if "JAVA_HOME" in os.environ
            else None
        )
        java = java or shutil.which("java")
        if java is None:
            raise KafkaUnavailable("no 'java' on PATH (Kafka 4 needs Java 17+)")
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="tracescore-kafka-"))
            self._owns_data_dir = True
        self.data_dir.mkdir(parents=True, exist_ok=True)
        formatted_before = _formatted_cluster_id(self.data_dir) is not None
        cluster_id = self._resolve_cluster_id()  # refuses a data directory formatted for another cluster
        properties = self._write_config()
        classpath = f"{libs}/*"
        archive = _class_archive(java, libs)
        jvm = [
            java,
            f"-Xmx{self.heap}",
            "-Xms128m",
            # A test broker serves little traffic and is started dozens of times per test run, several at once
            # on two cores: the client compiler alone halves the CPU a start costs, and the serial collector
            # keeps each JVM to one GC thread.
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            # Kafka's classes loaded from an archive of them (AppCDS), not parsed and verified from the jars
            # again: about half of the CPU of a start, for the broker and StorageTool alike.
            *([f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off"] if archive.exists() else []),
            f"-Dkafka.logs.dir={self.data_dir}",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.xml'}",
            "-cp",
            classpath,
        ]
        if not formatted_before:
            self._format(jvm, cluster_id, properties, libs)
        dump = []
        if not archive.exists():
            # No archive yet (the first start with these jars and this JVM): this broker writes one as it
            # exits, kept if it stops cleanly (stop()); each writes a file of its own, so parallel workers
            # never mix theirs.
            written = archive.with_name(f"{archive.name}.{uuid.uuid4().hex}.tmp")
            self._archive_dump = (written, archive)
            dump = [f"-XX:ArchiveClassesAtExit={written}", "-Xlog:cds=off"]
        # Appended, so the output of the runs before a restart stays readable; the child keeps its own copy.
        with (self.data_dir / "stdout.log").open("ab") as stdout:
            self.process = subprocess.Popen(
                [jvm[0], *dump, *jvm[1:], "kafka.Kafka", str(properties)],
                stdout=stdout,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the parent's terminal must not kill the broker mid-test
            )
        if self.guarded:
            # What close() deletes, and the class archive this run writes (its owner gone, none keeps it).
            remove = [self.data_dir] if self._owns_data_dir else []
            remove += [self._archive_dump[0]] if self._archive_dump else []
            self._guard = Guard.start(self.process, STOP_S, remove)
        self._wait_ready(timeout_s)

    def _format(self, jvm: list[str], cluster_id: str, properties: Path, libs: Path) -> None:
        """Kafka's StorageTool writes the data directory's metadata (and SCRAM users): once, at the first
        start. A restart finds it formatted for the same cluster and skips the tool's JVM (seconds of CPU
        on a loaded two-core machine, for nothing).

        What the tool writes depends on the Kafka release and the configuration, not on the cluster, the
        ports or the folder: the bootstrap checkpoint (the release's feature levels; its records' times
        aside) and meta.properties (the node, the cluster id and a new id for the directory). So it runs once
        per release and configuration, into a template beside the jars, and a new broker copies that with
        its own cluster id and a directory id of its own: a JVM less per broker (a third of a test broker's
        CPU from start to stop). SCRAM users are salted anew by each format: such a broker runs the tool."""
        assert self.data_dir is not None
        if scram := self._scram_credentials():
            _storage_tool(jvm, cluster_id, properties, scram)
            return
        text = properties.read_text()
        template = self._template(text, libs)
        with locked(libs.parent / "formatted.lock"):
            if not template.exists():
                folder = Path(tempfile.mkdtemp(prefix=f"{template.name}.", dir=libs.parent))
                try:
                    config = folder / "server.properties"
                    config.write_text(text.replace(str(self.data_dir), str(folder)))
                    _storage_tool(jvm, cluster_id, config, [])
                    config.unlink()
                    os.replace(folder / "data", template)
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
        ids = {"cluster.id": cluster_id, "directory.id": _directory_id()}
        logs = self.data_dir / "data"
        shutil.copytree(template, logs, dirs_exist_ok=True, ignore=shutil.ignore_patterns("meta.properties"))
        meta = []
        for line in (template / "meta.properties").read_text().splitlines(keepends=True):
            key, sep, _ = line.partition("=")
            meta.append(f"{key}={ids[key]}\n" if sep and key in ids else line)
        (logs / "meta.properties").write_text("".join(meta))

    def _template(self, properties: str, libs: Path) -> Path:
        """Where the storage StorageTool formats for this configuration (`properties`, the server.properties
        text) lives, beside the jars of `libs`."""
        # The folder and the ports out: the configuration that is left is what the tool reads.
        general = properties.replace(str(self.data_dir), "<dir>")
        general = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", general)
        key = hashlib.sha256(f"{libs}\n{general}".encode()).hexdigest()[:16]
        return libs.parent / f"formatted-{key}"

    def stop(self, timeout_s: float = STOP_S) -> None:
        """End the broker process; its data, cluster id and ports stay for a later start()."""
        process, dump, self._archive_dump = self.process, self._archive_dump, None
        # Writing the archive takes seconds more at exit (a minute on a loaded machine): not a hang.
        end_process(process, timeout_s if dump is None else timeout_s + 60, self._guard)
        self.process, self._guard = None, None
        if dump is not None and process is not None:
            written, archive = dump
            # Exited by itself on SIGTERM: the archive is whole. Killed: it may be cut short, so it goes.
            if process.returncode is not None and process.returncode >= 0 and written.exists():
                os.replace(written, archive)
            else:
                written.unlink(missing_ok=True)

    def restart(self, timeout_s: float = 60.0) -> KafkaBroker:
        """Stop and start again on the same data and ports: clients reconnect to the same address."""
        self.stop()
        return self.start(timeout_s)

    def close(self) -> None:
        """Stop for good, deleting the data directory if this broker created it."""
        self.stop()
        if self._owns_data_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir, self._owns_data_dir = None, False

    def __enter__(self) -> KafkaBroker:
        try:
            return self.start()
        except BaseException:
            self.close()  # __exit__ never runs when __enter__ raises
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _resolve_cluster_id(self) -> str:
        assert self.data_dir is not None
        formatted = _formatted_cluster_id(self.data_dir)
        if self.cluster_id is None:
            self.cluster_id = formatted or _cluster_id()
        elif formatted is not None and formatted != self.cluster_id:
            # Kafka would refuse to start ("Invalid cluster.id"); say why before launching the JVM.
            raise KafkaUnavailable(
                f"{self.data_dir} was formatted for cluster {formatted!r}, not {self.cluster_id!r}"
            )
        return self.cluster_id

    def _write_config(self) -> Path:
        assert self.data_dir is not None
        (self.data_dir / "log4j2.xml").write_text(_LOG4J2.format(level=self.log_level))
        config = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir / "data"),
            "num.partitions": str(self.partitions),
            # Single node: internal topics cannot have more replicas than brokers.
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            # Tests and demos start consumer groups constantly; the default 3 s delay only slows them.
            "group.initial.rebalance.delay.ms": "0",
            # Crash tests restart a killed member and wait out its session: let them pick a short one.
            "group.min.session.timeout.ms": "1000",
            # The controller's no-op record (a liveness beat for other brokers, of which there are none) every
            # 10 s rather than 0.5 s: a third less CPU for an idle test broker.
            "metadata.max.idle.interval.ms": "10000",
            "auto.create.topics.enable": "true",
        }
        if self.sasl_users:
            sasl = f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
            users = " ".join(f'user_{name}="{password}"' for name, password in self.sasl_users.items())
            config["listeners"] += f",{sasl}"
            config["advertised.listeners"] += f",{sasl}"
            config["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
            config["sasl.enabled.mechanisms"] = self.sasl_mechanism
            mechanism = self.sasl_mechanism.lower()
            config[f"listener.name.sasl_plaintext.{mechanism}.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
                if self.sasl_mechanism == "PLAIN"
                # SCRAM users live in the cluster metadata, written at format time (_scram_credentials).
                else "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
        path = self.data_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        return path

    def _scram_credentials(self) -> list[str]:
        if not self.sasl_users or not self.sasl_mechanism.startswith("SCRAM-"):
            return []
        return [
            f"--add-scram={self.sasl_mechanism}=[name={name},password={password}]"
            for name, password in self.sasl_users.items()
        ]

    def _wait_ready(self, timeout_s: float) -> None:
        assert self.process is not None
        try:
            wait_ready(
                self.process, self._answers_metadata, what="kafka.Kafka", timeout_s=timeout_s,
                log=self._log_tail, error=KafkaUnavailable, interval_s=0.3,
            )  # fmt: skip
        except KafkaUnavailable:
            self.stop()  # keeps the data directory, so the log tail stays readable
            raise

    def _answers_metadata(self) -> bool:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                pass
            admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=3000)
        except (OSError, KafkaError):
            return False
        try:
            # This broker, not another that took the port first (a parallel worker's, chosen free at the same
            # time): this one's JVM then exits "Address already in use", and start() chooses other ports.
            # Taken for ours, its tests would pause or restart a dead process while that one answered.
            return bool(admin.describe_cluster().get("cluster_id") == self.cluster_id)
        except KafkaError:
            return False
        finally:
            admin.close()

    def _log_tail(self, lines: int = 40) -> str:
        assert self.data_dir is not None
        return log_tail(self.data_dir / "stdout.log", self.data_dir / "server.log", lines=lines)


def _storage_tool(jvm: list[str], cluster_id: str, properties: Path, scram: list[str]) -> None:
    formatted = subprocess.run(
        [
            *jvm,
            "kafka.tools.StorageTool",
            "format",
            "--ignore-formatted",
            f"--cluster-id={cluster_id}",  # one argument: an id starting with "-" is not an option
            "-c",
            str(properties),
            *scram,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if formatted.returncode != 0:
        raise KafkaUnavailable(f"StorageTool format failed:\n{formatted.stdout}{formatted.stderr}")


# --- `make kafka` / `make kafka-stop`: a detached broker whose pid and address live in STATE_DIR ---------


@click.group()
def cli() -> None:
    """Run a development Apache Kafka broker from Maven Central jars."""


@cli.command()
@click.option("--state-dir", type=click.Path(path_type=Path), default=STATE_DIR, show_default=True)
def start(state_dir: Path) -> None:
    """Start a detached broker (reusing a running one) and print its bootstrap address."""
    state = state_dir / "broker.json"
    if state.exists():
        running = json.loads(state.read_text())
        if _pid_alive(running["pid"]):
            click.echo(running["bootstrap_servers"])
            return
    broker = KafkaBroker(data_dir=state_dir / "broker", guarded=False).start()  # `stop` ends it
    assert broker.process is not None
    state.write_text(json.dumps({"pid": broker.process.pid, "bootstrap_servers": broker.bootstrap_servers}))
    click.echo(broker.bootstrap_servers)


@cli.command()
@click.option("--state-dir", type=click.Path(path_type=Path), default=STATE_DIR, show_default=True)
def stop(state_dir: Path) -> None:
    """Stop the detached broker and delete its data."""
    state = state_dir / "broker.json"
    if not state.exists():
        click.echo("no broker running")
        return
    pid = json.loads(state.read_text())["pid"]
    if _pid_alive(pid):
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            if not _pid_alive(pid):
                break
            time.sleep(0.2)
        else:
            os.kill(pid, signal.SIGKILL)
    state.unlink()
    shutil.rmtree(state_dir / "broker", ignore_errors=True)
    click.echo(f"stopped broker (pid {pid})")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child still answers kill(0); treat it as gone.
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return False
    return True


if __name__ == "__main__":
    sys.exit(cli())
