"""The development broker as `make kafka` / `make kafka-stop` use it: detached, reused, stopped cleanly; and a
broker that ends with the process that started it, however that process ends."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _helpers import ends_with_its_owner
from kafka import KafkaProducer

from tracescore.testing import kafka_broker
from tracescore.testing.kafka_broker import KafkaBroker, _pid_alive, fetch_kafka_jars
from tracescore.testing.kafka_topics import read_topic

pytestmark = pytest.mark.kafka


def _cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tracescore.testing.kafka_broker", *args],
        capture_output=True, text=True, timeout=180, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def _values(bootstrap: str, topic: str) -> list[bytes]:
    return [m.value for m in read_topic(bootstrap, topic)]


def _meta_cluster_id(broker: KafkaBroker) -> str:
    assert broker.data_dir is not None
    meta = (broker.data_dir / "data" / "meta.properties").read_text()
    return next(line.split("=", 1)[1] for line in meta.splitlines() if line.startswith("cluster.id="))


def test_generated_cluster_ids_are_kafka_uuids() -> None:
    ids = {kafka_broker._cluster_id() for _ in range(200)}
    assert len(ids) == 200
    for cluster_id in ids:
        assert len(cluster_id) == 22 and "=" not in cluster_id
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16


DASHED = "-" + kafka_broker._cluster_id()[1:]


@pytest.fixture(scope="module")
def dashed_broker() -> Iterator[KafkaBroker]:
    """A broker whose generated cluster id starts with "-" (one in 64 does), for the two tests below: one JVM
    started and stopped for both (each on topics of its own). Its close() deletes the data directory it
    created, restarts or not. It has a SCRAM user, so StorageTool itself formats its storage with the
    dashed id as an argument (other brokers copy a template the tool formatted once)."""
    broker = KafkaBroker(partitions=1, sasl_users={"dashed": "secret"}, sasl_mechanism="SCRAM-SHA-256")
    try:
        with pytest.MonkeyPatch.context() as patch:  # the id is generated at the first start
            patch.setattr(kafka_broker, "_cluster_id", lambda: DASHED)
            broker.start()
        data_dir = broker.data_dir
        yield broker
    finally:
        broker.close()
    assert data_dir is not None and not data_dir.exists(), "close() left the data directory it created"


def test_a_cluster_id_starting_with_a_dash_formats_and_starts(dashed_broker: KafkaBroker) -> None:
    # StorageTool once read such an id as an option and refused to format.
    broker = dashed_broker
    assert broker.cluster_id == DASHED
    assert _meta_cluster_id(broker) == DASHED, "storage was formatted with the dashed id"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
    assert producer.send("dashed", b"hello").get(timeout=30).offset == 0
    producer.close()
    assert _values(broker.bootstrap_servers, "dashed") == [b"hello"]


def test_restart_keeps_address_cluster_and_messages(dashed_broker: KafkaBroker) -> None:
    broker = dashed_broker
    bootstrap, cluster_id, data_dir = broker.bootstrap_servers, broker.cluster_id, broker.data_dir
    assert data_dir is not None
    # One producer across the restart, as an application's would be mid-stream.
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    before = [f"before-{i}".encode() for i in range(5)]
    for value in before:
        producer.send("restarted", value).get(timeout=30)

    broker.stop()
    assert broker.process is None
    assert (data_dir / "data" / "meta.properties").exists(), "stop() keeps the data for a restart"
    broker.start()
    # The stop wrote the class archive of Kafka's jars if none was there: every start now loads it.
    assert broker.process is not None
    assert any(str(arg).startswith("-XX:SharedArchiveFile=") for arg in broker.process.args)

    assert broker.bootstrap_servers == bootstrap and broker.cluster_id == cluster_id
    assert broker.data_dir == data_dir and _meta_cluster_id(broker) == cluster_id
    assert _values(bootstrap, "restarted") == before, "messages from before the restart are still there"
    assert producer.send("restarted", b"after").get(timeout=60).offset == len(before)
    producer.close()
    assert _values(bootstrap, "restarted") == [*before, b"after"]

    broker.restart()
    assert broker.bootstrap_servers == bootstrap
    assert _values(bootstrap, "restarted") == [*before, b"after"]


def _meta(folder: Path) -> dict[str, str]:
    lines = (folder / "meta.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_a_new_broker_is_formatted_from_the_template_with_ids_of_its_own(
    kafka_broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """StorageTool (a JVM: a third of a test broker's CPU) runs once per Kafka release and configuration,
    into a template beside the jars (the shared broker's start made the one of this configuration); a new
    broker's storage is that template with its own cluster id and a directory id of its own, and the broker
    starts on it, answering as its cluster."""

    def storage_tool(*args: object) -> None:
        pytest.fail("StorageTool ran")

    monkeypatch.setattr("tracescore.testing.kafka_broker._storage_tool", storage_tool)
    with KafkaBroker() as broker:
        assert broker.data_dir is not None
        template = broker._template((broker.data_dir / "server.properties").read_text(), fetch_kafka_jars())
        checkpoint = (template / "bootstrap.checkpoint").read_bytes()
        assert (broker.data_dir / "data" / "bootstrap.checkpoint").read_bytes() == checkpoint
        own, formatted = _meta(broker.data_dir / "data"), _meta(template)
        assert own["cluster.id"] == broker.cluster_id != formatted["cluster.id"]
        assert own["directory.id"] != formatted["directory.id"] and not own["directory.id"].startswith("-")
        ids = ("cluster.id", "directory.id")
        assert {k: v for k, v in own.items() if k not in ids} == {
            k: v for k, v in formatted.items() if k not in ids
        }
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
        assert producer.send("copied", b"hello").get(timeout=30).offset == 0
        producer.close()


def test_a_data_dir_formatted_for_another_cluster_is_refused_before_kafka_starts(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    # Two ids that differ in their first character only, whatever _cluster_id() returns (it starts with
    # '-' one time in 64, which once made both ids the same).
    other = "A" + kafka_broker._cluster_id()[1:]
    (tmp_path / "data" / "meta.properties").write_text(f"cluster.id={other}\nnode.id=1\nversion=1\n")
    broker = KafkaBroker(data_dir=tmp_path, cluster_id="-" + other[1:])
    with pytest.raises(kafka_broker.KafkaUnavailable, match="formatted for cluster"):
        broker.start()
    assert broker.process is None


def test_jars_are_cached_outside_the_repo() -> None:
    libs = fetch_kafka_jars()
    repo = Path(__file__).resolve().parents[2]
    assert repo not in libs.parents
    jars = {p.name for p in libs.glob("*.jar")}
    assert any(j.startswith("kafka_2.13-4.") for j in jars), "an Apache Kafka 4.x broker"
    assert any(j.startswith("kafka-clients-4.") for j in jars)


def test_detached_broker_starts_once_is_reused_and_stops(tmp_path: Path) -> None:
    state = tmp_path / "state"
    bootstrap = _cli("start", "--state-dir", str(state))
    try:
        pid = json.loads((state / "broker.json").read_text())["pid"]
        # It outlives the command that started it (a broker's guard ends it with its starter: not this one).
        assert _cli("start", "--state-dir", str(state)) == bootstrap, "a running broker is reused"
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        assert producer.send("smoke", b"hello").get(timeout=30).offset == 0
        producer.close()
        assert _pid_alive(pid) and json.loads((state / "broker.json").read_text())["pid"] == pid
    finally:
        stopped = _cli("stop", "--state-dir", str(state))
    assert f"pid {pid}" in stopped
    assert not _pid_alive(pid)
    assert not (state / "broker").exists(), "its data is removed"
    assert _cli("stop", "--state-dir", str(state)) == "no broker running"


def test_stopping_frees_the_ports() -> None:
    broker = KafkaBroker().start()
    process = broker.process
    assert process is not None
    try:
        broker.stop()
        assert process.poll() is not None, "the broker process has exited"
        for port in (broker.port, broker.controller_port):
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
            with socket.socket() as sock:
                # SO_REUSEADDR ignores TIME_WAIT leftovers but still fails while anything listens there.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("127.0.0.1", port))
                sock.listen()
    finally:
        broker.close()


def test_a_port_taken_before_the_first_start_is_chosen_again_and_a_restart_keeps_its_address() -> None:
    """A port free when chosen can be taken before the JVM binds it (a parallel test worker, any program):
    the first start chooses again; once started, the address is the broker's for good, so a restart whose
    port is taken fails rather than moving."""
    broker = KafkaBroker()
    taken = broker.port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        try:
            broker.start()
            assert broker.port != taken
            assert _values(broker.bootstrap_servers, "none-yet") == []
            broker.stop()
            with socket.socket() as again:
                again.bind(("127.0.0.1", broker.port))
                with pytest.raises(kafka_broker.KafkaUnavailable, match="Address already in use"):
                    broker.start()
        finally:
            broker.close()


def test_a_port_taken_by_another_broker_before_the_first_start_is_chosen_again(
    kafka_broker: KafkaBroker,
) -> None:
    """Two brokers started at once (parallel test workers) can choose the same free port. The one that bound
    it second exited ("Address already in use"), but the other answered its readiness check, so its start
    returned: its tests then paused (SIGSTOP) or restarted a dead process while the other broker answered
    them. The readiness check now asks for this broker's cluster id, and the start chooses other ports."""
    broker = KafkaBroker(port=kafka_broker.port)
    try:
        broker.start()
        assert broker.port != kafka_broker.port, "the other broker's port taken for this one's"
        assert broker.process is not None and broker.process.poll() is None, "this broker's JVM exited"
        assert _values(broker.bootstrap_servers, "none-yet") == []
    finally:
        broker.close()


# A process that starts a broker from a thread that has ended when it reports the broker (a guard tied to
# the starting thread, as PR_SET_PDEATHSIG is, would have ended the broker with it), then runs until killed.
_OWNER = """
import json, sys, threading
from tracescore.testing.kafka_broker import KafkaBroker

broker = KafkaBroker(partitions=1)
starting = threading.Thread(target=broker.start)
starting.start()
starting.join()
print(json.dumps({"pid": broker.process.pid, "bootstrap": broker.bootstrap_servers,
                  "folder": str(broker.data_dir), "marker": str(broker.data_dir)}), flush=True)
sys.stdin.read()
"""


def test_a_broker_ends_with_the_process_that_started_it_however_it_is_killed() -> None:
    """A test run killed on a timeout (SIGKILL: no close(), no atexit) left its brokers' JVMs running for
    good, 1 GB each, their data directories beside them."""

    def answers(started: dict[str, Any]) -> None:
        assert _values(started["bootstrap"], "none-yet") == [], "the broker answers after its thread ended"

    ends_with_its_owner(_OWNER, "the broker's JVM", check=answers)
