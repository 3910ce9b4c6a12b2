"""Stage 1's consumer group holds one service's members only.

`tracescore alert` and `tracescore conversations` both read the evaluation records in stage 1's group,
`group_id`. Given one group id, their members would join one group and split the records' partitions between
them: each service would see only part of the records, and say nothing. Their internal topics cannot meet
(each derives its own: `tracescore._config.group_topic_field`), but the group is the user's name.

So each service's clients carry its name as their Kafka client id, and the group's members are looked at
(DescribeGroups) before the first poll and after each change of stage 1's assignment or of its group's
generation (a member joined or left: a cooperative rebalance may change none of this member's partitions,
as for both members of a one-partition topic), between the poll that brought the change and the batch it may
bring with it: a member of the other service there is `GroupShared`, one line that says what to do, and the
service exits before it re-keys any of that batch (left uncommitted). Two started at once both join, and the
rebalance that follows has each look again, each BROKER_WAIT_S at most.

A look the broker does not answer (it restarts just after the rebalance, and the group comes back with the
same generation: no change to look again at) is tried again 5 s later, then less and less often (`RETRY_S`),
until one is answered: given up, the other service's member that rebalance brought would go unnoticed, and
both services would read on, each seeing part of the records, without a word. A look the broker refuses (not
allowed to describe the group) is not tried again: a warning says the check waits for the group to change.

A look given up on still runs, and the next one waits for it (one call at a time on the client): its answer
is the group as it was when it was asked. One asked before the latest change is not taken for the group after
it (the member that change brought would go unnoticed): unless it already shows the other service's members,
the group is looked at again.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import GroupIdNotFoundError, KafkaError, for_code

from tracescore._kafka import BROKER_WAIT_S, made_or_closed
from tracescore._kafka_config import KafkaConnection
from tracescore._service._bounded import BoundedCall, ClosedAtStop

__all__ = ["RETRY_S", "SERVICES", "GroupCheck", "GroupLook", "GroupShared", "client_id"]

_log = logging.getLogger("tracescore")

# After a look the broker did not answer, the next: this much later, the pause doubling to at most the second.
RETRY_S = (5.0, 60.0)

# How kafka-python writes a broker's error code for a group it describes: "[Error 14] CoordinatorLoad...".
_ERROR_CODE = re.compile(r"\[Error (-?\d+)\]")

# The services that re-key the evaluation records, by the name each is run as.
SERVICES = ("tracescore alert", "tracescore conversations")


def client_id(service: str) -> str:
    """The Kafka client id of `service`'s clients ("tracescore-alert"): the broker's logs and quotas, and
    other members of a group, see whose they are."""
    return service.replace(" ", "-")


class GroupShared(KafkaError):
    """Stage 1's group has members of another service (a KafkaError: the command line prints it as one
    line, exit status 1)."""


class GroupLook:
    """The looks at a group's members of one run, on one admin client of `client` (made at the first look,
    `close`d at the stop): before the first poll and after each change of the group, how many members it
    has (`outnumbered`, which decides when an empty assignment starts `--idle-timeout`'s clock: the services'
    stages, `tracescore consume`). `unlooked`: what goes unchecked when the broker refuses the looks."""

    def __init__(
        self,
        connection: KafkaConnection,
        group_id: str,
        client: str,
        stopping: Callable[[], bool],
        unlooked: str = "an empty assignment counts as for good until its members change",
    ) -> None:
        self.connection, self.group_id, self._client = connection, group_id, client
        self._stopping = stopping
        self._unlooked = unlooked
        self._due = True  # before the first poll
        self._changed_at = float("-inf")  # the latest change (monotonic): answers asked before it are old
        self._retry_at: float | None = None  # when a look the broker did not answer is tried again
        self._pause_s = RETRY_S[0]
        self._counted: int | None = None  # how many, as looked at since the latest change (None: not yet)
        self._blind = False  # the broker refused the looks: the members are not known until a change
        self._admin = ClosedAtStop(self._new_admin, f"the admin client of the looks at group {group_id}")
        # One call at a time: a look given up on still runs, and the next one waits for it (not two threads
        # on the one client).
        self._look = BoundedCall(self._asked_members, f"a look at the members of group {group_id}")

    def changed(self, _: Sequence[TopicPartition] = ()) -> None:
        """The member's assignment or its group's generation changed (on the client's IO thread, or after the
        poll: only noted)."""
        self._changed_at = time.monotonic()
        self._due = True
        self._counted = None

    def outnumbered(self, partitions: int) -> bool:
        """The group has more members than `partitions` (an empty assignment of a member is then for good,
        not a cooperative join's first generation), as looked at since its latest change; True when the
        broker refuses the looks (the first stable generation then counts, as without them)."""
        return self._blind or (self._counted is not None and self._counted > partitions)

    def __call__(self) -> None:
        """Look at the group's members when due, or when a look the broker did not answer is tried again. No
        pass waits on a look longer than BROKER_WAIT_S, and none once a stop is asked for."""
        retry = self._retry_at is not None and time.monotonic() >= self._retry_at
        if not (self._due or retry):
            return
        self._due, self._retry_at = False, None
        try:
            asked_at, members = self._look(self._stopping, BROKER_WAIT_S)
        except KafkaError as exc:
            self._failed(exc, retry)
            return
        self._pause_s = RETRY_S[0]
        self._blind = False
        current = asked_at > self._changed_at
        if current:
            self._counted = len(members)
        self._seen(members, current)

    def _seen(self, members: list[dict[str, Any]], current: bool) -> None:
        """What a look found: `members`, as the group was since its latest change unless not `current`."""
        if not current:
            # The answer of a look given up on, asked before the group changed: the next pass looks again.
            _log.debug("group %s changed after the look was asked: looking again", self.group_id)
            self._due = True

    def _failed(self, exc: KafkaError, retry: bool) -> None:
        """A look that failed: tried again later when the broker may answer then (not at a stop)."""
        if self._stopping():
            return
        if not exc.retriable:
            self._blind = True
            _log.warning(
                "could not look at the members of group %s: %s. %s (an authorization error: allow the "
                "principal to describe the group)",
                self.group_id,
                exc,
                self._unlooked[:1].upper() + self._unlooked[1:],
            )
            return
        if retry:  # failed again: less often
            self._pause_s = min(2 * self._pause_s, RETRY_S[1])
        self._retry_at = time.monotonic() + self._pause_s
        pause = self._pause_s
        _log.debug("could not look at group %s's members: %s; again in %gs", self.group_id, exc, pause)

    def _asked_members(self) -> tuple[float, list[dict[str, Any]]]:
        """When the look was asked (monotonic), and the group's members it found."""
        return time.monotonic(), self._members()

    def _members(self) -> list[dict[str, Any]]:
        """The group's members; the broker's error for the group raised (kafka-python 3.0.12 returns it as
        text beside no members: the coordinator loading after a restart is no answer, not an empty group)."""
        described = self._admin.get().describe_groups([self.group_id]).get(self.group_id) or {}
        error = _ERROR_CODE.match(described.get("error") or "")
        if error is not None:
            kind = for_code(int(error[1]))
            if kind is not GroupIdNotFoundError:  # no such group yet (DescribeGroups v6): no members
                raise kind(f"looking at group {self.group_id}: {described['error']}")
        return list(described.get("members") or [])

    def _new_admin(self) -> KafkaAdminClient:
        wait_ms = int(BROKER_WAIT_S * 1000)
        return made_or_closed(
            KafkaAdminClient,
            **self.connection.client_config(),
            client_id=self._client,
            request_timeout_ms=wait_ms,
            bootstrap_timeout_ms=wait_ms,
        )

    def close(self) -> None:
        """Close the admin client, if a look made one (a look given up on that still runs ends with an error
        nobody waits for); no look makes another."""
        self._admin.close()


class GroupCheck(GroupLook):
    """Stage 1's looks of one service run: a member of the other service there is GroupShared."""

    def __init__(
        self, connection: KafkaConnection, group_id: str, service: str, stopping: Callable[[], bool]
    ) -> None:
        super().__init__(
            connection,
            group_id,
            client_id(service),
            stopping,
            unlooked="whether the other service's members share it is not checked again until its members "
            "change",
        )
        self.service = service
        self._others = {client_id(s): s for s in SERVICES if s != service}

    def _seen(self, members: list[dict[str, Any]], current: bool) -> None:
        found = sorted({self._others[m["client_id"]] for m in members if m.get("client_id") in self._others})
        if found:
            hosts = sorted({str(m.get("client_host", "?")).strip("/") for m in members})
            raise GroupShared(
                f"group {self.group_id!r} also has members of {' and '.join(found)} (hosts: "
                f"{', '.join(hosts)}): given one group_id, the services split the evaluation records between "
                f"them and each sees only part. Give each service its own group_id (the defaults differ: "
                "tracescore-alert, tracescore-conversations)"
            )
        super()._seen(members, current)
