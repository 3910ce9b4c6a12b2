"""The Kafka service base of `tracescore alert` and `tracescore conversations` (private: the services'
own machinery, not an API).

    input topics --(stage 1: RekeyStage)--> keyed topic --(stage 2: KeyedStage + a service's KeyedLogic)
                                                              |            |
                                                   outputs <--+            +--> state topic, partitioned
                                                                                like the keyed topic

`ServiceLoop` runs both stages; a service supplies what to forward (`Forward`) and its `KeyedLogic`: how a
record changes a key's state (a pydantic `StateRecord` with a schema version), which outputs a state
decides, and which states to save. Docs: Contributing, Architecture (state, commits and restarts).
"""

from tracescore._service._awaited import AwaitedInputs
from tracescore._service._bounded import BROKER_WAIT_S, STOP_CHECK_S, BoundedCall, StopBudget
from tracescore._service._changelog import Changelog, ChangelogError, PartitionMeta
from tracescore._service._clock import StreamClock, StreamTime
from tracescore._service._codec import StateCodec, StateRecord, UnreadableState
from tracescore._service._counts import StateCount
from tracescore._service._crash import CRASH_ENV, PAUSE_ENV, crash_point
from tracescore._service._group_check import GroupLook, client_id
from tracescore._service._keyed import KeyedStage
from tracescore._service._keyed_logic import KeyedLogic, Saved
from tracescore._service._loop import LoopService, ServiceLoop, ServiceTopics
from tracescore._service._outputs import (
    OUTPUT_DIGEST_HEADER,
    OUTPUT_ID_HEADER,
    Output,
    OutputLog,
    close_shares,
)
from tracescore._service._overdue import OVERDUE_EXIT, OverdueExit
from tracescore._service._reach import BrokerReach, Reach
from tracescore._service._rekey import Forward, RekeyStage

__all__ = [
    "BROKER_WAIT_S",
    "CRASH_ENV",
    "OUTPUT_DIGEST_HEADER",
    "OUTPUT_ID_HEADER",
    "OVERDUE_EXIT",
    "PAUSE_ENV",
    "STOP_CHECK_S",
    "AwaitedInputs",
    "BoundedCall",
    "BrokerReach",
    "Changelog",
    "ChangelogError",
    "Forward",
    "GroupLook",
    "KeyedLogic",
    "KeyedStage",
    "LoopService",
    "Output",
    "OutputLog",
    "OverdueExit",
    "PartitionMeta",
    "Reach",
    "RekeyStage",
    "Saved",
    "ServiceLoop",
    "ServiceTopics",
    "StateCodec",
    "StateCount",
    "StateRecord",
    "StopBudget",
    "StreamClock",
    "StreamTime",
    "UnreadableState",
    "client_id",
    "close_shares",
    "crash_point",
]
