"""The checkpoint a stop ends with (SIGTERM, idle): stage 2's checkpoint once more, every step bounded by the
stop's deadline, and what could not be done put in words for the stop's one warning line."""

from __future__ import annotations

from kafka.errors import KafkaError

from tracescore._service._bounded import why
from tracescore._service._keyed import KeyedStage

__all__ = ["READ_AGAIN", "final_checkpoint", "restore_given_up"]

READ_AGAIN = (
    "the next start reads those records again from the last commit (nothing is lost; what they decide may be "
    "decided again)"
)


def final_checkpoint(stage: KeyedStage, deadline: float) -> str | None:
    """`stage.checkpoint` once a stop was asked for, every step bounded by `deadline` (time.monotonic): no
    decision is taken, no look for a deleted state topic (it may wait for a broker that is gone), and the
    input offsets are committed only once the state that covers them is saved. What could not be done
    (None: everything was)."""
    if not stage.consumer.assignment():
        return None
    read = stage.read_past_commit()
    # Read before the steps below (whose commit asks again, and may find the deadline passed by then).
    not_asked = _not_asked(stage)
    said = [part for part in (not_asked, _checkpoint(stage, deadline, read)) if part]
    return "; ".join(said) or None


def _not_asked(stage: KeyedStage) -> str | None:
    if not stage.not_asked:
        return None
    return (
        f"the positions of {stage.topic}[{','.join(map(str, stage.not_asked))}] not asked of the client "
        "(the deadline passed): taken as far as applied"
    )


def _checkpoint(stage: KeyedStage, deadline: float, read: list[int]) -> str | None:
    found = stage.found_outputs()
    outputs = stage.logic.outputs(found)
    not_committed = (
        f"the offsets read on {stage.topic}[{','.join(map(str, read))}] not committed{{}}: {READ_AGAIN}"
    )
    try:
        if outputs:
            stage.write(outputs, found, lambda: deadline)
    except KafkaError as exc:
        return (
            f"{len(outputs)} output(s) decided not acknowledged ({why(exc)}; the broker may still write "
            "them, the next start looks for them again right before it writes them), so no state saved and "
            + not_committed.format("")
        )
    try:
        stage.save(wrote_outputs=bool(outputs), deadline=deadline)
    except KafkaError as exc:
        return f"{stage.unsaved} state(s) not saved ({why(exc)}) and {not_committed.format('')}"
    try:
        if read:  # records read past the commit: the group hears where this member stopped
            stage.commit(deadline)
    except KafkaError as exc:
        return not_committed.format(f" ({why(exc)})")
    again = stage.logic.after_save()
    undelivered = stage.logic.not_delivered()
    if again:
        try:
            stage.save(wrote_outputs=False, deadline=deadline, first=again)
        except KafkaError as exc:
            not_saved = (
                f"{len(again)} state(s) recording deliveries not saved ({why(exc)}): the next start "
                "delivers those notifications again"
            )
            return "; ".join(part for part in (not_saved, undelivered) if part)
    return undelivered


def restore_given_up(stage: KeyedStage) -> str | None:
    """What a restore a stop gave up on left, in words (None: none was)."""
    if not stage.not_restored:
        return None
    partitions = ",".join(map(str, stage.not_restored))
    return (
        f"the restore of {stage.topic}[{partitions}] given up on: nothing of those partitions applied or "
        "committed, their next owner restores them"
    )
