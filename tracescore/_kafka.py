"""Every Kafka client step the services share (`tracescore consume`, `tracescore alert`, `tracescore
conversations`): connect with one clear error, probe the broker, create topics, wait for a new topic's
partitions or for the topics a reader reads to be written, the rebalance listener, log-once, and lag read
through kafka-python's public API only."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from kafka import ConsumerRebalanceListener, KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.consumer.fetcher import ConsumerRecord
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.errors import (
    Cancelled,
    InconsistentGroupProtocolError,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    for_code,
)
from kafka.protocol.metadata import MetadataRequest
from kafka.structs import MemberState, OffsetAndMetadata

from tracescore._first_join import first_join
from tracescore._kafka_config import KafkaConnection, RebalanceProtocol, SettingOrigin
from tracescore._plural import counted

__all__ = [
    "BROKER_WAIT_S",
    "BrokerUnreachable",
    "GroupProtocolMismatch",
    "LogOnce",
    "RebalanceListener",
    "caught_up",
    "check_broker",
    "committed_offsets",
    "connect",
    "ensure_topics",
    "group_member",
    "known_lag",
    "known_partitions",
    "lag",
    "log_reader",
    "made_or_closed",
    "not_creating_topics",
    "probe_consumer",
    "protocol_checked",
    "quiet_kafka_client_noise",
    "read_partitions",
    "read_with",
    "ready_to_read",
    "redact_in_client_logs",
    "rekeying_clients",
    "subscribe_topics",
    "topic_partitions",
    "wait_for_partitions",
]

_log = logging.getLogger("tracescore")
T = TypeVar("T")
C = TypeVar("C", KafkaConsumer, KafkaAdminClient)

# The longest one broker call of a service's pass may take (a look for a topic, end offsets for a status line
# or the stream time, a periodic commit): kafka-python's 30 s request timeout would outlast a stop's budget.
BROKER_WAIT_S = 10.0


# What to do about an unreachable broker, said with the error (every command reads the same variable).
_ASK = "Is a broker running there, and reachable from here?"
BROKER_HINT = f"{_ASK} Give its address as host:port with --bootstrap-servers or TRACESCORE_BOOTSTRAP_SERVERS"


def broker_hint(origin: SettingOrigin | None = None) -> str:
    """BROKER_HINT, saying where the address came from when the settings know it: a config file's address
    overrides TRACESCORE_BOOTSTRAP_SERVERS for some commands, so the hint names the source to correct, and
    the flag, which comes before every other."""
    if origin is None:
        return BROKER_HINT
    if origin.kind == "flag":
        return f"{_ASK} The address is the one --bootstrap-servers gave: give the broker's as host:port"
    if origin.kind == "default":
        return f"{BROKER_HINT} (this address is the default: no flag, variable or config file gave one)"
    where = origin.name if origin.kind == "variable" else f"bootstrap_servers in {origin.name or 'the file'}"
    return (
        f"{_ASK} The address came from {where}: correct it there, or give the broker's as host:port with "
        "--bootstrap-servers, which comes first"
    )


class BrokerUnreachable(RuntimeError):
    """No Kafka broker answered within the connect timeout, or it refused the client (authentication, TLS)."""


def check_broker(
    bootstrap_servers: str, when: str, wait_s: float = 5.0, origin: SettingOrigin | None = None
) -> None:
    """Raise BrokerUnreachable unless a bootstrap server accepts a TCP connection within `wait_s` (`origin`:
    where the address came from, said in the error)."""
    deadline = time.monotonic() + wait_s
    last_error: OSError | None = None
    while True:
        for address in bootstrap_servers.split(","):
            host, _, port = address.strip().rpartition(":")
            try:
                with socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=2):
                    return
            except (OSError, ValueError) as exc:
                last_error = exc if isinstance(exc, OSError) else OSError(str(exc))
        if time.monotonic() >= deadline:
            raise BrokerUnreachable(
                f"no Kafka broker reachable at {bootstrap_servers} ({when}; tried for {wait_s:.0f}s, "
                f"last error: {last_error}). {broker_hint(origin)}"
            )
        time.sleep(0.5)


def connect(connection: KafkaConnection, build: Callable[[dict[str, Any]], T]) -> T:
    """`build(client_config)` once a broker answers: one clear error, not a stream of client logs, when
    none does within the connect timeout or the broker refuses the client."""
    check_broker(
        connection.bootstrap_servers,
        "starting",
        wait_s=connection.connect_timeout_s,
        origin=connection.bootstrap_origin,
    )
    redact_in_client_logs(*connection.security.secrets())
    try:
        return build(connection.client_config())
    except KafkaError as exc:
        # Authentication, TLS or protocol problems: one line naming the cause, never a traceback.
        raise BrokerUnreachable(
            f"cannot connect to Kafka at {connection.bootstrap_servers} "
            f"({connection.security.security_protocol}): {type(exc).__name__}: {exc}. Check the security "
            "settings against the broker's listener (TRACESCORE_KAFKA__SECURITY_PROTOCOL, __SASL_*, __SSL_*)"
        ) from exc


def not_creating_topics() -> dict[str, Any]:
    """A KafkaConsumer's or KafkaProducer's settings so that its metadata requests never make the broker
    create the topics they name (`auto.create.topics.enable`): a reader of a misspelt topic would leave it on
    the broker. kafka-python 3.0 accepts `allow_auto_create_topics` but builds its cluster metadata without it
    (every request asks for creation), so its documented `kafka_client` factory (the same for both) applies
    it to that metadata."""
    return {"allow_auto_create_topics": False, "kafka_client": _client_not_creating_topics}


def _client_not_creating_topics(**configs: Any) -> Any:
    client = KafkaConsumer.DEFAULT_CONFIG["kafka_client"](**configs)
    client.cluster.config["allow_auto_create_topics"] = False
    return client


def made_or_closed(build: Callable[..., C], **config: Any) -> C:
    """`build(**config)`: a KafkaConsumer or KafkaAdminClient, whose network client is closed when building
    it fails. kafka-python 3.0.12 starts a client's IO thread in its constructor, before its first
    connection: one that fails (no broker within `bootstrap_timeout_ms`) raises with no object to close, and
    the thread stays, idle, holding a socket pair, for the life of the process: one more at every try while
    the broker is away. The network client is made through kafka-python's documented `kafka_client` setting
    (the one `config` gives, if any), which hands it here to close."""
    made: list[Any] = []
    make = config.pop("kafka_client", KafkaConsumer.DEFAULT_CONFIG["kafka_client"])

    def kept(**configs: Any) -> Any:
        client = make(**configs)
        made.append(client)
        return client

    try:
        return build(**config, kafka_client=kept)
    except BaseException:
        for client in made:
            client.close()
        raise


def probe_consumer(client_config: Mapping[str, Any], **config: Any) -> KafkaConsumer:
    """A consumer in no group, committing nothing, whose looks (`topics()`, `partitions_for_topic`, offsets)
    and reads by partition never make the broker create a topic (`not_creating_topics`); `config`: more of
    kafka-python's settings. Nothing left running when no broker answers its first connection."""
    return made_or_closed(
        KafkaConsumer,
        **client_config,
        group_id=None,
        enable_auto_commit=False,
        **not_creating_topics(),
        **config,
    )


Partitioned = dict[str, tuple[int, ...]]  # topic -> its partition ids, sorted
_RETRY_S = 0.1  # between two metadata requests while no broker answers (kafka-python's retry backoff)


def topic_partitions(
    client: KafkaConsumer | KafkaAdminClient, topics: Iterable[str], timeout_s: float | None = None
) -> Partitioned:
    """Those of `topics` that exist now, each with its partitions, in one metadata request naming them alone:
    never the cluster's every topic, which `KafkaConsumer.topics()`, `KafkaAdminClient.list_topics()` and a
    miss of `partitions_for_topic` all ask for (with 3,000 topics some 66 ms of client CPU and 108 ms of the
    broker's a look, once a second per service waiting for an input). The request never makes the broker
    create a topic it names (`allow_auto_topic_creation` off: auto.create.topics.enable would), and a topic it
    does not know is left out, not logged (kafka-python logs one its own metadata tracks as an ERROR).

    The answer becomes `client`'s cached metadata (its topics' leaders: offsets asked next need no request of
    their own). A broker that does not answer is asked again until `timeout_s` (None: BROKER_WAIT_S;
    KafkaTimeoutError then); a client closed meanwhile fails at once (Cancelled). kafka-python has no
    public call for it on a consumer (`KafkaAdminClient.describe_topics` is one on an admin client only,
    and leaves its metadata as it was): the client's connection manager sends the request, as kafka-python's
    own metadata refresh does."""
    names = sorted(set(topics))
    if not names:
        return {}
    manager = client._manager
    timeout_s = BROKER_WAIT_S if timeout_s is None else timeout_s
    deadline = time.monotonic() + timeout_s

    async def ask(wait_ms: int) -> Any:
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=name) for name in names],
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        response = await manager.wait_for(manager.send(request), wait_ms)
        manager.cluster.update_metadata(response)
        return response

    while True:
        try:
            response = manager.run(ask, max(1, int((deadline - time.monotonic()) * 1000)))
            break
        except KafkaError as exc:
            if not exc.retriable or isinstance(exc, Cancelled):  # Cancelled: the client closed (a stop)
                raise
            if time.monotonic() + _RETRY_S >= deadline:
                raise KafkaTimeoutError(
                    f"no answer within {timeout_s:g}s looking up {', '.join(names)}: {exc}"
                ) from exc
            time.sleep(_RETRY_S)
    return {
        t.name: tuple(sorted(p.partition_index for p in t.partitions))
        for t in response.topics
        if t.error_code == 0 and t.name in names
    }


def known_partitions(
    consumer: KafkaConsumer, topics: Iterable[str], timeout_s: float | None = None
) -> Partitioned:
    """`topic_partitions` of `topics` from `consumer`'s cached metadata when it holds every one of them (no
    request), else from a look at them all (the cache holds those of the last look, until kafka-python's
    own refresh, every `metadata_max_age_ms`). For a look repeated often (each tick), where a partition
    added a refresh later is soon enough."""
    names = list(dict.fromkeys(topics))
    cluster = consumer._client.cluster
    cached = {name: cluster.partitions_for_topic(name) for name in names}
    if all(cached.values()):
        return {name: tuple(sorted(cached[name] or ())) for name in names}
    return topic_partitions(consumer, names, timeout_s)


def ensure_topics(
    connection: KafkaConnection, topics: Iterable[str | NewTopic], *, read: Iterable[str] = ()
) -> tuple[str, ...]:
    """Create the missing topics (a name: with the broker's defaults), said at info level, once the
    broker's metadata shows them with a leader for every partition (within the connect timeout); return
    those of the `read` topics that do not exist (a reader does not create what it reads: its writers do).
    Best effort: where this client may not create topics, the broker's auto-creation or the operator's
    provisioning applies; where it cannot even list them, none is said absent.

    The wait is why nothing that writes or subscribes next logs an error: the broker answers CreateTopics
    before its metadata shows the topic (KRaft applies it moments later), and a client asking for the topic
    in between is told it does not exist, which kafka-python logs as an ERROR ("Topic X not found in
    cluster metadata"), as it does for a producer whose first send makes the broker auto-create the topic."""
    wanted = {t.name: t for t in (t if isinstance(t, NewTopic) else NewTopic(t, -1, -1) for t in topics)}
    try:
        admin = made_or_closed(KafkaAdminClient, **connection.client_config())
    except KafkaError as exc:
        _log.debug("cannot check topics: %s", exc)
        return ()
    try:
        existing = set(topic_partitions(admin, {*read, *wanted}, connection.connect_timeout_s))
        absent = tuple(sorted(set(read) - existing - set(wanted)))
        missing = [topic for name, topic in sorted(wanted.items()) if name not in existing]
        if not missing:
            return absent
        # raise_errors=False: another process creating the same topic at the same moment is fine.
        made = _answered(missing, admin.create_topics(missing, raise_errors=False))
        try:
            admin.wait_for_topics(made, timeout_ms=connection.connect_timeout_s * 1000)
        except KafkaTimeoutError as exc:
            _log.debug("created topics not in the metadata yet: %s", exc)
        return absent
    except KafkaError as exc:
        _log.debug("could not create topics %s: %s", sorted(wanted), exc)
        return ()
    finally:
        admin.close()


# CreateTopics' error codes of a topic that exists after it: none, and another process created it meanwhile.
_CREATED = frozenset({0, TopicAlreadyExistsError.errno})


def _answered(asked: Sequence[NewTopic], answer: Mapping[str, Any]) -> list[str]:
    """The topics of `asked` that exist after the broker's CreateTopics `answer` (as `create_topics` returns
    it), to be waited for; those it created said at info level, each it refused or left out said in a
    warning. A topic refused (no permission, a policy) will not appear, and one the answer leaves out is
    not known to: neither is waited for."""
    by_name = {t["name"]: t for t in answer.get("topics", ())}
    created = [t.name for t in asked if t.name in by_name and by_name[t.name].get("error_code") == 0]
    if created:
        _log.info("created topics: %s", ", ".join(created))
    for topic in asked:
        if topic.name not in by_name:
            _log.warning(
                "asked to create the topic %s (%s), the broker's answer did not mention it: it may not "
                "exist. Check that it does, or create it",
                topic.name,
                _asked(topic),
            )
        elif by_name[topic.name].get("error_code") not in _CREATED:
            _log.warning("%s", _refused(topic, by_name[topic.name]))
    return [t.name for t in asked if by_name.get(t.name, {}).get("error_code", -1) in _CREATED]


def _asked(topic: NewTopic) -> str:
    """What CreateTopics asked for `topic`: partitions, replication factor, configs."""

    def asked_for(value: int) -> str:
        return "the broker's default" if value == -1 else str(value)  # -1: CreateTopics' "not set"

    return ", ".join(
        [
            f"partitions {asked_for(topic.num_partitions)}",
            f"replication factor {asked_for(topic.replication_factor)}",
            *(f"{key}={value}" for key, value in sorted((topic.topic_configs or {}).items())),
        ]
    )


def _refused(topic: NewTopic, answer: Mapping[str, Any]) -> str:
    """What the broker said refusing to create `topic` (its CreateTopics answer), with what was asked for."""
    error = for_code(answer.get("error_code", -1))
    reason = (answer.get("error_message") or error.description).rstrip(".")
    return (
        f"could not create the topic {topic.name} ({_asked(topic)}): the broker refused it, "
        f"{error.__name__}: {reason}. Create it as a user allowed to, with settings the broker accepts, or "
        "change the setting it refused"
    )


def wait_for_partitions(client_config: Mapping[str, Any], topics: Iterable[str], timeout_s: float) -> None:
    """Return once the cluster's metadata holds partitions for every topic (or after `timeout_s`).

    Call it before a group member subscribes: a member that joins while the metadata does not show a topic
    yet (one created moments before, by this process or another) is assigned none of its partitions until a
    later metadata refresh. A separate client asks, so the member's own metadata state stays untouched (the
    member asking itself rebalanced once more right after joining)."""
    missing = set(topics)
    deadline = time.monotonic() + timeout_s
    probe = probe_consumer(client_config)
    try:
        while True:
            try:  # the missing ones alone, never every topic (`topic_partitions`)
                found = topic_partitions(probe, missing, max(0.1, deadline - time.monotonic()))
            except KafkaError as exc:  # no answer in time: looked at again, or said below
                _log.debug("looking for the partitions of %s: %s", ", ".join(sorted(missing)), exc)
                found = {}
            missing = {topic for topic in missing if not found.get(topic)}
            if not missing:
                return
            if time.monotonic() >= deadline:
                _log.warning(
                    "no partitions known for %s after %.0fs; subscribing anyway (assigned once they are)",
                    ", ".join(sorted(missing)),
                    timeout_s,
                )
                return
            time.sleep(0.2)
    finally:
        probe.close()


def ready_to_read(
    connection: KafkaConnection,
    read: Sequence[str],
    unwritten_said: Callable[[str], None],
    *,
    create: Iterable[str | NewTopic] = (),
    subscribed: Sequence[str] = (),
) -> tuple[str, ...]:
    """A reader's start, before it subscribes: `create` made where missing, never a topic of `read` (a
    misspelt name would be left on the broker: its writers create it); each of those that does not exist
    said with `unwritten_said(topic)` (the reader waits for its writer), the partitions of the others and of
    the other `subscribed` topics waited for (`wait_for_partitions`). The absent ones: the member does not
    subscribe to them until they exist (`tracescore._service.AwaitedInputs`)."""
    absent = ensure_topics(connection, create, read=read)
    for topic in absent:
        unwritten_said(topic)
    present = [t for t in dict.fromkeys([*read, *subscribed]) if t not in absent]
    if present:
        wait_for_partitions(connection.client_config(), present, timeout_s=connection.connect_timeout_s)
    return absent


def subscribe_topics(consumer: KafkaConsumer, topics: Sequence[str], listener: RebalanceListener) -> None:
    """`consumer.subscribe(topics)`, topics that exist (a member never subscribes to one that does not:
    `tracescore._service.AwaitedInputs`), its first join's warning about them expected (`first_join`)."""
    first_join.expect(topics)
    consumer.subscribe(list(topics), listener=listener)


def group_member(session_timeout_ms: int, protocol: RebalanceProtocol) -> dict[str, Any]:
    """A consumer group member's settings: its session, its heartbeats and the assignor of `protocol`."""
    return {
        "session_timeout_ms": session_timeout_ms,
        # Kafka's rule of thumb: a heartbeat at most a third of the session, so two may be lost.
        "heartbeat_interval_ms": min(3_000, session_timeout_ms // 3),
        # kafka-python's default assignors are all eager; it refuses to mix eager and cooperative ones.
        **(
            {"partition_assignment_strategy": (CooperativeStickyAssignor,)}
            if protocol == "cooperative"
            else {}
        ),
    }


class GroupProtocolMismatch(KafkaError):
    """The group refused a member: its members rebalance with the other protocol (one line, what to do)."""

    @classmethod
    def of(cls, group: str, protocol: RebalanceProtocol, setting: str) -> GroupProtocolMismatch:
        other = "eager" if protocol == "cooperative" else "cooperative"
        return cls(
            f"group {group!r} refused this member: its members rebalance {other}ly and this one {protocol}ly "
            f"({setting}). Every member of a group must use the same; members of a tracescore without that "
            f"setting rebalance eagerly: start new members with {setting} eager until the old ones are gone, "
            "then switch them all at once"
        )


@contextmanager
def protocol_checked(group: str, protocol: RebalanceProtocol, setting: str) -> Iterator[None]:
    """A member refused by its group for its rebalance protocol raises GroupProtocolMismatch, which says what
    to do, instead of kafka-python's InconsistentGroupProtocolError."""
    try:
        yield
    except InconsistentGroupProtocolError as exc:
        raise GroupProtocolMismatch.of(group, protocol, setting) from exc


def rekeying_clients(
    client: dict[str, Any],
    group: str,
    second: str,
    session_timeout_ms: int,
    protocol: RebalanceProtocol,
    max_poll_interval_ms: int,
    client_id: str,
) -> tuple[KafkaConsumer, KafkaConsumer, KafkaProducer]:
    """The clients of a service that re-keys a topic into one of its own (`tracescore alert` by route,
    `tracescore conversations` by conversation), all named `client_id`: a member of `group` reading the
    input, a member of `group.<second>` reading the re-keyed topic, both committing themselves and neither
    ever creating a topic, and a producer that waits for every in-sync replica."""
    client = {**client, "client_id": client_id}
    member = {
        **client,
        "enable_auto_commit": False,
        **not_creating_topics(),  # an input is its writers' to create (ready_to_read); the keyed topic ours
        "auto_offset_reset": "earliest",
        **group_member(session_timeout_ms, protocol),
        "max_poll_interval_ms": max_poll_interval_ms,
    }
    made: list[KafkaConsumer] = []
    try:
        for group_id in (group, f"{group}.{second}"):
            made.append(made_or_closed(KafkaConsumer, **member, group_id=group_id))
        return made[0], made[1], KafkaProducer(**client, acks="all")
    except BaseException:  # `connect` says why in one line; nothing of these left running
        for consumer in made:
            consumer.close(autocommit=False, timeout_ms=0)
        raise


def read_partitions(
    connection: KafkaConnection,
    topic: str,
    partitions: Sequence[int],
    start: Mapping[int, int] | None = None,
    give_up: Callable[[], bool] = lambda: False,
) -> Iterator[ConsumerRecord]:
    """Every message of `partitions` of `topic` from their beginning (or the offsets `start` gives) to their
    end offsets now, read without a group and without ever creating the topic: what a service restores from
    its compacted state topic (`read_with`, by a reader of its own, closed once read)."""
    if not partitions:
        return
    if give_up():  # no client made once given up on: its first connection would wait BROKER_WAIT_S
        raise KafkaTimeoutError(f"reading {topic}: given up on, a stop was asked for")
    reader = log_reader(connection)
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        yield from read_with(reader, {tp: (start or {}).get(tp.partition) for tp in tps}, give_up)
    finally:
        reader.close()


def log_reader(connection: KafkaConnection) -> KafkaConsumer:
    """A consumer for `read_with`: in no group, never creating a topic, raising on an offset out of range."""
    wait_ms = int(BROKER_WAIT_S * 1000)
    return probe_consumer(
        connection.client_config(),
        bootstrap_timeout_ms=wait_ms,  # its first connection (30 s by default)
        request_timeout_ms=wait_ms,  # each request, its first metadata's too (30 s by default)
        auto_offset_reset="none",  # an offset out of range raises: said and handled by read_with
    )


def read_with(
    reader: KafkaConsumer,
    start: Mapping[TopicPartition, int | None],
    give_up: Callable[[], bool] = lambda: False,
    end: Mapping[TopicPartition, int] | None = None,
) -> Iterator[ConsumerRecord]:
    """Every message of the topic partitions of `start` from there (None: their beginning) to their end
    offsets now (`end`, when the caller read them: one call for both), read by `reader` (a `log_reader`,
    assigned those partitions: one kept for many reads skips a new client's connection and first metadata
    each time).

    Records gone below a start (retention or delete_records moved the log start past it, before or during
    the read) are not silently skipped to the end, kafka-python's default reset: the read goes on from the
    earliest offset left, and a warning says how many offsets were lost.

    However long the partitions take to read, no wait is open-ended: each broker call waits BROKER_WAIT_S at
    most, and so does the read while it gets no further (KafkaTimeoutError, saying what it read and how far);
    `give_up()` is looked at before each broker call of the loop (KafkaTimeoutError): a read abandoned for a
    stop ends within BROKER_WAIT_S, one call's wait, and leaves no thread behind."""
    tps = list(start)
    if not tps:
        return
    where = ", ".join(
        f"{topic}[{','.join(str(tp.partition) for tp in tps if tp.topic == topic)}]"
        for topic in dict.fromkeys(tp.topic for tp in tps)
    )
    wait_ms = int(BROKER_WAIT_S * 1000)
    reader.assign(tps)
    reader.seek_to_beginning(*tps)
    for tp, offset in start.items():
        if offset is not None:
            reader.seek(tp, offset)
    if end is None and give_up():
        raise KafkaTimeoutError(f"reading {where}: given up on, a stop was asked for")
    end = dict(end) if end is not None else reader.end_offsets(tps, timeout_ms=wait_ms)
    moved_at, before = time.monotonic(), None
    while True:
        at = []
        for tp in tps:  # the stop looked at before each position: each may wait BROKER_WAIT_S
            if give_up():
                raise KafkaTimeoutError(f"reading {where}: given up on, a stop was asked for")
            at.append(reader.position(tp, timeout_ms=wait_ms))
        if all(a is not None and a >= end[tp] for a, tp in zip(at, tps, strict=True)):
            return
        if at != before:
            moved_at, before = time.monotonic(), at
        elif time.monotonic() - moved_at > BROKER_WAIT_S:
            raise KafkaTimeoutError(
                f"no answer from the broker within {BROKER_WAIT_S:g}s reading {where} (offset/end: "
                f"{', '.join(f'{a}/{end[tp]}' for a, tp in zip(at, tps, strict=True))})"
            )
        try:
            polled = reader.poll(timeout_ms=500)
        except OffsetOutOfRangeError as exc:
            _read_on_from_log_start(reader, exc, end, wait_ms)
            continue
        for messages in polled.values():
            yield from messages


def _read_on_from_log_start(
    reader: KafkaConsumer, exc: OffsetOutOfRangeError, end: dict[TopicPartition, int], wait_ms: int
) -> None:
    """Move each partition whose fetch offset is out of range to the earliest offset left (one warning: how
    many were lost), or, past its log's end (the topic recreated, its log truncated), to that end, which
    ends its read (one warning)."""
    out_of_range: Mapping[TopicPartition, int] = exc.args[0] if exc.args else {}
    tps = list(out_of_range)
    starts = reader.beginning_offsets(tps, timeout_ms=wait_ms)
    ends = reader.end_offsets(tps, timeout_ms=wait_ms)
    for tp, offset in out_of_range.items():
        where = f"{tp.topic}[{tp.partition}]"
        if offset < starts[tp]:
            _log.warning(
                "%s: offsets %d to %d are gone (%s, lost to retention or deletion): read from %d",
                where,
                offset,
                starts[tp] - 1,
                counted(starts[tp] - offset, "offset"),
                starts[tp],
            )
            reader.seek(tp, starts[tp])
        else:
            _log.warning(
                "%s: offset %d is past its log's end %d (the topic recreated, or its log truncated): nothing "
                "more to read there",
                where,
                offset,
                ends[tp],
            )
            end[tp] = min(end[tp], ends[tp])
            reader.seek(tp, ends[tp])


Partitions = Callable[[Sequence[TopicPartition]], None]


class RebalanceListener(ConsumerRebalanceListener):
    """Forwards a group member's rebalance callbacks (run on the client's IO thread: they must not block),
    logs each assignment and remembers when the first one came (`first_assigned_at`, monotonic), and when
    the member started waiting for inputs no writer had created yet (`waiting_since`). `regrouped`: called
    from `polled` (on the poll thread) once the group completed a new generation, a member having joined or
    left, whether or not this member's partitions changed (a cooperative rebalance that changes none calls
    no other callback: a member joining a group of one partition, given none). `outnumbered(n)`: whether the
    group's members, as last looked at, are more than `n` partitions (None: every empty assignment is final).
    A cooperative join gives a new member nothing in its first generation, while the others give up what it
    is to get, and its partitions in the next (a heartbeat later, some 3 s): an empty assignment starts the
    idle clock only when the members outnumber the partitions, so some stay without any for good."""

    def __init__(
        self,
        log: logging.Logger,
        *,
        assigned: Partitions,
        revoked: Partitions,
        lost: Partitions | None = None,
        regrouped: Callable[[], None] | None = None,
        outnumbered: Callable[[int], bool] | None = None,
    ) -> None:
        self._log = log
        self._outnumbered = outnumbered
        self._assigned = assigned
        self._revoked = revoked
        self._lost = lost or revoked
        self._regrouped = regrouped
        self._generation: int | None = None
        self.first_assigned_at: float | None = None
        self.waiting_since: float | None = None
        self._joining = False  # subscribed to an input that exists: in its group once assigned

    def subscribed(self, present: Collection[str], absent: Collection[str]) -> None:
        """The member subscribes now to `present`, its inputs that exist (it joins its group), and waits for
        `absent`, which do not; called again when one of them appears."""
        self._joining = bool(present)
        if absent and self.waiting_since is None:
            self.waiting_since = time.monotonic()

    @property
    def waiting(self) -> bool:
        """Waiting for inputs that did not exist, and given no partition yet: waiting for their writers."""
        return self.waiting_since is not None and self.first_assigned_at is None

    @property
    def idle_from(self) -> float | None:
        """When idleness (`--idle-timeout`) starts counting: the first assignment (waiting to join, a dead
        member's session still holding the partitions, is not idleness), or the start of the wait, for a
        member that waits for topics nobody has written yet and subscribes to none that exists, so joins no
        group (monotonic). One that subscribes to an input that exists waits for its assignment however many
        others it waits for: counted from the wait, a restart stopped idle while the killed member's session
        held the inputs, having read nothing."""
        if self.first_assigned_at is not None:
            return self.first_assigned_at
        return None if self._joining else self.waiting_since

    def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        self._revoked(revoked)

    def on_partitions_lost(self, lost: Sequence[TopicPartition]) -> None:
        self._lost(lost)

    def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        self._log.info("assigned partitions: %s", sorted(f"{tp.topic}[{tp.partition}]" for tp in assigned))
        first_join.joined({tp.topic for tp in assigned})
        if self.first_assigned_at is None:
            self.first_assigned_at = time.monotonic()
        self._assigned(assigned)

    def polled(self, consumer: KafkaConsumer) -> None:
        """After each poll: a member in its group with nothing to read got an assignment too (a cooperative
        rebalance calls no listener for an empty one); a new generation of the group, `regrouped`."""
        group = consumer.group_metadata()
        if group.state != MemberState.STABLE:
            return
        if self.first_assigned_at is None and self._none_for_good(consumer):
            self.first_assigned_at = time.monotonic()
        if group.generation_id != self._generation:
            self._generation = group.generation_id
            if self._regrouped is not None:
                self._regrouped()

    def _none_for_good(self, consumer: KafkaConsumer) -> bool:
        """A stable generation gave this member no partition (a non-empty one was `on_partitions_assigned`),
        and none is on its way: more members than the partitions of its topics."""
        if self._outnumbered is None:
            return True
        topics = consumer.subscription() or ()
        return self._outnumbered(sum(len(consumer.partitions_for_topic(t) or ()) for t in topics))


class LogOnce:
    """A line (a warning unless told) the first time a key is seen, none after: a flood of bad input is not
    a flood of logs; the caller's counts carry the rest. `most`: the keys remembered at most, so keys drawn
    from input cannot grow it without bound; past it one line says so and nothing more is logged."""

    def __init__(self, log: logging.Logger, most: int | None = None) -> None:
        self._log = log
        self._seen: set[Hashable] = set()
        self._most = most
        self._full = False

    def __call__(self, key: Hashable, message: str, *args: object, level: int = logging.WARNING) -> bool:
        """Log `message % args` if `key` is new; True when it was logged."""
        if key in self._seen or self._full:
            return False
        if self._most is not None and len(self._seen) >= self._most:
            self._full = True
            self._log.log(level, "%d kinds logged once each: further kinds are only counted", self._most)
            return False
        self._seen.add(key)
        self._log.log(level, message, *args)
        return True


def committed_offsets(
    consumer: KafkaConsumer, partitions: Collection[TopicPartition], timeout_ms: int
) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """The group's committed offset of each of `partitions`, with its metadata (None: nothing committed),
    in one OffsetFetch within `timeout_ms` (KafkaTimeoutError past it; the broker's error as a KafkaError).

    The public `consumer.committed(tp)` asks for one partition per call, a round trip each. Its
    coordinator's `fetch_committed_offsets` (private; what `committed` calls with one partition) asks for
    many on the member's own coordinator connection, retries a coordinator still loading, and leaves out
    those with nothing committed. The public one that asks for many, the admin client's
    `list_group_offsets`, opens a client of its own per call (bootstrap, metadata, FindCoordinator: more
    round trips than it saves) and retries nothing."""
    found = consumer._coordinator.fetch_committed_offsets(list(partitions), timeout_ms=timeout_ms)
    return {tp: found.get(tp) for tp in partitions}


def lag(consumer: KafkaConsumer, ask_broker: bool = False) -> dict[TopicPartition, int | None]:
    """Messages left per assigned partition: the end offset minus the next offset to fetch (None while
    either is unknown). `ask_broker`: the end offsets from the broker (a network call, for a status line;
    at most BROKER_WAIT_S, then the high watermarks); otherwise the high watermarks the last fetches
    returned (free, for a check every loop)."""
    assigned = list(consumer.assignment())
    if not assigned:
        return {}
    ends: Mapping[TopicPartition, int | None]
    if ask_broker:
        try:
            ends = consumer.end_offsets(assigned, timeout_ms=int(BROKER_WAIT_S * 1000))
        except KafkaError:
            ends = {tp: consumer.highwater(tp) for tp in assigned}
    else:
        ends = {tp: consumer.highwater(tp) for tp in assigned}
    out: dict[TopicPartition, int | None] = {}
    for tp in assigned:
        end, position = ends.get(tp), _position(consumer, tp)
        out[tp] = None if end is None or position is None else max(0, end - position)
    return out


def known_lag(consumer: KafkaConsumer) -> dict[TopicPartition, int | None]:
    """`lag`, with the broker asked when some partition's end no fetch reported (and none is known to lag):
    under an incremental fetch session (KIP-227) the broker leaves a partition out of every response until
    it changes, so a partition given back at an offset its session already held (a rebalance) never gets
    a high watermark, and a member waiting for it to be read would wait forever."""
    left = lag(consumer)
    if any(n is None for n in left.values()) and not any(left.values()):
        left = lag(consumer, ask_broker=True)
    return left


def caught_up(consumer: KafkaConsumer) -> bool:
    """Every assigned partition read to its end (free while the fetches report the ends; see known_lag)."""
    return all(n == 0 for n in known_lag(consumer).values())


def _position(consumer: KafkaConsumer, tp: TopicPartition) -> int | None:
    # position() returns the held position without a network call once every assigned partition has one;
    # the short timeout bounds the call otherwise (a partition just assigned).
    try:
        return consumer.position(tp, timeout_ms=100)
    except KafkaError:
        return None


class _Redact(logging.Filter):
    def __init__(self, secrets: tuple[str, ...]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if any(secret in message for secret in self.secrets):
            for secret in self.secrets:
                message = message.replace(secret, "**********")
            record.msg, record.args = message, None
        return True


def redact_in_client_logs(*secrets: str | None) -> None:
    """Mask `secrets` in every kafka-python log record: at DEBUG it dumps requests, SASL credentials
    included. Filters sit on the client's loggers themselves, so every handler (ours, pytest's, the
    application's) only ever sees the masked text."""
    wanted = tuple(s for s in secrets if s)
    if not wanted:
        return
    names = [n for n in logging.Logger.manager.loggerDict if n == "kafka" or n.startswith("kafka.")]
    for name in names:
        logger = logging.getLogger(name)
        existing = next((f for f in logger.filters if isinstance(f, _Redact)), None)
        if existing is None:
            logger.addFilter(_Redact(wanted))
        else:
            existing.secrets = tuple(dict.fromkeys((*existing.secrets, *wanted)))


class _ClosedTransportRace(logging.Filter):
    """kafka-python 3.0's own race: closing a client closes its sockets from the calling thread while its
    network thread may be between "socket readable" and recv(); that thread then finds the socket gone and
    logs an ERROR with a traceback (AttributeError on None) for a transport already closed on purpose.
    Nothing is lost; only that record, naming a closed transport, is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        args = record.args if isinstance(record.args, tuple) else ()
        return not (isinstance(error, AttributeError) and any(str(a).endswith("(closed)>") for a in args))


class _CancelledByClose(logging.Filter):
    """kafka-python logs a metadata request cancelled by its client's close as an ERROR ("Metadata refresh:
    failed Cancelled"): a look for a topic under way when the service stops, closed on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(isinstance(a, Cancelled) for a in args)


class _SlowTask(logging.Filter):
    """kafka-python 3 warns when one step of its network thread's tasks took over 0.1 s ("Task ... ran for
    0.227s (>0.100s threshold). It is blocking the event loop ..."): on a loaded machine, a thread that was
    not scheduled. It says nothing of the service's health and alarms whoever reads the log; the selector's
    other warnings still show."""

    def filter(self, record: logging.LogRecord) -> bool:
        said = record.getMessage()
        return not (said.startswith("Task ") and "threshold). It is blocking the event loop" in said)


def quiet_kafka_client_noise() -> None:
    """Drop kafka-python's log records that say nothing of the service's health and alarm whoever reads
    them: its errors about a client's own close, the traceback of a socket read racing it
    (`_ClosedTransportRace`), which every command that closes a client could print after a run that went
    well, and a request it cancelled (`_CancelledByClose`); and its network thread's slow-step warning,
    "It is blocking the event loop" (`_SlowTask`). Its other warnings and errors still show."""
    for name, quiet in (
        ("kafka.net.transport", _ClosedTransportRace),
        ("kafka.cluster", _CancelledByClose),
        ("kafka.net.selector", _SlowTask),
    ):
        logger = logging.getLogger(name)
        if not any(isinstance(f, quiet) for f in logger.filters):
            logger.addFilter(quiet())
