"""What a state topic holds, typed and versioned: every value is a pydantic model with a `schema_version`.

A service's state model derives from `StateRecord` and fixes its version (`schema_version: Literal[2] = 2`).
Adding a field with a default is additive within a version: an older reader ignores it, a newer reader
fills it in. Removing a field or changing what one means takes a new version and a reader of the old one.
`StateCodec.decode` refuses, with a reason and a one-line detail, anything else: a value of a future version
(written by a newer tracescore), one that is not a versioned state at all, or one that fails validation.
"""

from __future__ import annotations

import json
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from tracescore.model import ServiceSkip

__all__ = ["StateCodec", "StateRecord", "UnreadableState"]


class StateRecord(BaseModel):
    """The base of every state topic value."""

    # Fields a newer tracescore added within this version are dropped on read, never an error.
    model_config = ConfigDict(extra="ignore")

    schema_version: int


StateT = TypeVar("StateT", bound=StateRecord)


class UnreadableState(ValueError):
    """A state topic value this version cannot use: `reason` is the counter's name, `detail` one line."""

    def __init__(self, reason: ServiceSkip, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class StateCodec(Generic[StateT]):
    """Encodes and decodes one service's state model (`model`, at `model`'s own schema version)."""

    def __init__(self, model: type[StateT]) -> None:
        self.model = model
        self.version: int = model.model_fields["schema_version"].default

    def encode(self, state: StateT) -> bytes:
        return state.model_dump_json(exclude_none=False).encode()

    def decode(self, raw: bytes) -> StateT:
        """The state `raw` holds; UnreadableState for anything this version did not write."""
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, ValueError):
            raise UnreadableState(ServiceSkip.INVALID_STATE, f"not JSON ({len(raw)} bytes)") from None
        version = data.get("schema_version") if isinstance(data, dict) else None
        if not isinstance(version, int) or isinstance(version, bool):
            raise UnreadableState(
                ServiceSkip.INVALID_STATE,
                "no schema_version: not a state this service writes (an unversioned snapshot of an earlier "
                "version is read from the old state topic only, see legacy_state_topic)",
            )
        if version > self.version:
            raise UnreadableState(
                ServiceSkip.FUTURE_STATE_VERSION,
                f"schema_version {version}, written by a newer tracescore (this one reads {self.version}); "
                "run one version across the group",
            )
        if version < self.version:
            raise UnreadableState(
                ServiceSkip.OLD_STATE_VERSION,
                f"schema_version {version}, which this version ({self.version}) no longer reads",
            )
        try:
            return self.model.model_validate(data)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(part) for part in first["loc"])
            raise UnreadableState(ServiceSkip.INVALID_STATE, f"{where}: {first['msg']}"[:200]) from None
