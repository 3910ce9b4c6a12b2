"""What the `tracescore` commands share."""

from __future__ import annotations

from typing import Any, get_args

import click

from tracescore._kafka_config import KafkaConnection

__all__ = ["kafka_security_options", "or_usage_error", "service_connection"]


def or_usage_error(factory: Any, *args: Any, **kwargs: Any) -> Any:
    """`factory(...)`, its ValueError shown as a usage error (one line, exit status 2)."""
    try:
        return factory(*args, **kwargs)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


def kafka_security_options(fn: Any) -> Any:
    """The Kafka security flags of `tracescore alert` and `tracescore conversations`, named as consume's (the
    password only from the environment)."""
    from tracescore._kafka_config import KafkaSecurity, SaslMechanism, SecurityProtocol

    fields = KafkaSecurity.model_fields
    choices = {"security_protocol": get_args(SecurityProtocol), "sasl_mechanism": get_args(SaslMechanism)}
    for name in reversed(
        ["security_protocol", "sasl_mechanism", "sasl_username", "ssl_cafile", "ssl_certfile", "ssl_keyfile"]
    ):
        kind = click.Choice(choices[name]) if name in choices else click.STRING
        env = f"TRACESCORE_KAFKA__{name.upper()}"
        help_text = f"{(fields[name].description or '').rstrip('.')}. [env: {env}]"
        fn = click.option(f"--kafka-{name.replace('_', '-')}", f"kafka_{name}", type=kind, help=help_text)(fn)
    return fn


def service_connection(config: Any, connect_timeout: float | None, flags: dict[str, Any]) -> KafkaConnection:
    """How `tracescore alert` and `tracescore conversations` reach Kafka: TRACESCORE_KAFKA__* with the flags
    on top; the brokers from --bootstrap-servers > TRACESCORE_<COMMAND>_BOOTSTRAP_SERVERS > the config file >
    TRACESCORE_BOOTSTRAP_SERVERS (the name the SDK and consume read) > the default."""
    import os

    from pydantic import ValidationError

    from tracescore._kafka_config import kafka_settings_from_env

    given = {key.removeprefix("kafka_"): value for key, value in flags.items()}
    try:
        security = kafka_settings_from_env(**given).security()
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            path = [str(part) for part in error["loc"]]
            name = path[-1] if len(path) > 1 else ""
            where = f"--kafka-{name.replace('_', '-')}" if given.get(name) is not None else None
            where = where or "TRACESCORE_" + "__".join(p.upper() for p in path)
            problems.append(f"invalid value for {where}: {error['msg'].removeprefix('Value error, ')}")
        raise click.UsageError("; ".join(problems)) from None
    servers = config.bootstrap_servers
    if "bootstrap_servers" not in config.model_fields_set:
        servers = os.environ.get("TRACESCORE_BOOTSTRAP_SERVERS") or servers
    timeout = {} if connect_timeout is None else {"connect_timeout_s": connect_timeout}
    return KafkaConnection(bootstrap_servers=servers, security=security, **timeout)
