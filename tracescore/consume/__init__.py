"""Consume: read OTLP spans from Kafka in a consumer group, assemble whole traces, score them, commit."""

from tracescore.consume._assemble import AssemblySettings, TraceAssembler, assemble_messages
from tracescore.consume._clients import BrokerUnreachable
from tracescore.consume._consumer import EvaluationConsumer, GroupProtocolMismatch, OutputNotAcknowledged
from tracescore.consume._counts import AssemblyCount, AssemblyCounts, Incomplete
from tracescore.consume._decode import NotOtlp, decode_message
from tracescore.consume._settings import ConfigFileError, ConsumerSettings, KafkaSecurity
from tracescore.consume._spend import JudgeSpend, describe_budget
from tracescore.consume._status import ConsumerStats, RateLimitedLogs

__all__ = [
    "AssemblyCount",
    "AssemblyCounts",
    "AssemblySettings",
    "BrokerUnreachable",
    "ConfigFileError",
    "ConsumerSettings",
    "ConsumerStats",
    "EvaluationConsumer",
    "GroupProtocolMismatch",
    "Incomplete",
    "JudgeSpend",
    "KafkaSecurity",
    "NotOtlp",
    "OutputNotAcknowledged",
    "RateLimitedLogs",
    "TraceAssembler",
    "assemble_messages",
    "decode_message",
    "describe_budget",
]
