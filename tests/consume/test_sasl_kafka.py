"""SASL/SCRAM: the SDK, the service and the alerting service authenticate to a real broker that requires
it, configured by one shared environment, and the password never shows."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from _zygote import run as forked_run
from kafka_helpers import make_consumer, run_instrumented_app
from service_processes import checkout_env

from tracescore.consume import BrokerUnreachable, EvaluationConsumer
from tracescore.model import EvaluationRecord
from tracescore.testing.kafka_broker import KafkaBroker

pytestmark = pytest.mark.kafka

PASSWORD = "s3cret-scorer-password"


@pytest.fixture(scope="module")
def sasl_broker() -> Iterator[KafkaBroker]:
    with KafkaBroker(sasl_users={"scorer": PASSWORD}, sasl_mechanism="SCRAM-SHA-512") as broker:
        yield broker


def consumer_for(
    broker: KafkaBroker, prefix: str, password: str
) -> tuple[EvaluationConsumer, list[EvaluationRecord]]:
    return make_consumer(
        broker.sasl_bootstrap_servers,
        prefix,
        connect_timeout_s=10,
        kafka={
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": "scorer",
            "sasl_password": password,
        },
    )


def test_the_service_scores_through_a_sasl_listener_and_never_logs_the_password(
    sasl_broker: KafkaBroker, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    run_instrumented_app(
        sasl_broker.bootstrap_servers,  # the plaintext listener: only the service authenticates here
        f"{topic_prefix}.spans",
        """
        @tracescore.rag
        def good(query, contexts):
            return "Paris is the capital of France."

        good("capital of France?", ["Paris is the capital of France."])
        """,
    )
    consumer, seen = consumer_for(sasl_broker, topic_prefix, PASSWORD)
    stats = consumer.run()
    assert stats.scored == 1 and len(seen) == 1
    assert PASSWORD not in caplog.text
    assert all(PASSWORD not in record.model_dump_json() for record in seen)


def test_a_wrong_password_is_one_clear_error(sasl_broker: KafkaBroker, topic_prefix: str) -> None:
    consumer, _ = consumer_for(sasl_broker, topic_prefix, "not-the-password")
    with pytest.raises(BrokerUnreachable) as caught:
        consumer.run()
    message = str(caught.value)
    assert "cannot connect to Kafka" in message and "SASL_PLAINTEXT" in message
    assert "not-the-password" not in message


def test_the_sdk_exports_through_the_sasl_listener_with_its_env_settings(
    sasl_broker: KafkaBroker, topic_prefix: str
) -> None:
    """The SDK and the service read the same TRACESCORE_KAFKA__* variables: an app configured only by
    environment exports through the authenticated listener, and the service scores what it wrote."""
    import os
    import sys
    import textwrap

    from kafka_helpers import REPO

    app = textwrap.dedent(
        """
        import tracescore
        tracescore.init(service_name="sasl-app")

        @tracescore.rag
        def good(query, contexts):
            return "Paris is the capital of France."

        good("capital of France?", ["Paris is the capital of France."])
        tracescore.shutdown(timeout_s=60)  # the topic is new on a broker started moments ago
        """
    )
    env = {
        **os.environ,
        "TRACESCORE_BOOTSTRAP_SERVERS": sasl_broker.sasl_bootstrap_servers,
        "TRACESCORE_TOPIC": f"{topic_prefix}.spans",
        "TRACESCORE_KAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "TRACESCORE_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
        "TRACESCORE_KAFKA__SASL_USERNAME": "scorer",
        "TRACESCORE_KAFKA__SASL_PASSWORD": PASSWORD,
    }
    done = forked_run([sys.executable, "-c", app], env=checkout_env(env), cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "tracescore dropped" not in done.stderr, done.stderr
    assert PASSWORD not in done.stderr
    consumer, seen = consumer_for(sasl_broker, topic_prefix, PASSWORD)
    assert consumer.run().scored == 1 and seen[0].service_name == "sasl-app"


def test_one_environment_runs_the_sdk_consume_and_alert_through_scram(
    sasl_broker: KafkaBroker, topic_prefix: str
) -> None:
    """One `.env` for the three processes, as a team deploys them: the SDK's producer knobs do not stop the
    services, every client authenticates with SCRAM-SHA-512, and what the app wrote is scored and alerted
    on. Each process is a real `python` process reading only its environment."""
    import os
    import subprocess
    import sys
    import textwrap

    from kafka_helpers import REPO

    env = {
        **os.environ,
        "TRACESCORE_BOOTSTRAP_SERVERS": sasl_broker.sasl_bootstrap_servers,
        "TRACESCORE_TOPIC": f"{topic_prefix}.spans",
        "TRACESCORE_CONNECT_TIMEOUT_S": "20",
        "TRACESCORE_KAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "TRACESCORE_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
        "TRACESCORE_KAFKA__SASL_USERNAME": "scorer",
        "TRACESCORE_KAFKA__SASL_PASSWORD": PASSWORD,
        # The SDK's producer tuning, documented for the app: read by the SDK, accepted by the services.
        "TRACESCORE_KAFKA__DELIVERY_TIMEOUT_MS": "60000",
        "TRACESCORE_KAFKA__LINGER_MS": "20",
        "TRACESCORE_GROUP_ID": f"{topic_prefix}.group",
        "TRACESCORE_EVALUATIONS_TOPIC": f"{topic_prefix}.evaluations",
        "TRACESCORE_DLQ_TOPIC": f"{topic_prefix}.dlq",
        "TRACESCORE_ALERT_EVALUATIONS_TOPIC": f"{topic_prefix}.evaluations",
        "TRACESCORE_ALERT_GROUP_ID": f"{topic_prefix}.alert",
        "TRACESCORE_ALERT_ROUTES_TOPIC": f"{topic_prefix}.alert.routes",
        "TRACESCORE_ALERT_STATE_TOPIC": f"{topic_prefix}.alert.state",
    }

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        done = forked_run([sys.executable, *argv], env=checkout_env(env), cwd=REPO, timeout=240)
        assert PASSWORD not in done.stdout + done.stderr
        return done

    app = textwrap.dedent(
        """
        import json
        import tracescore
        tracescore.init(service_name="scram-app")

        @tracescore.rag
        def good(query, contexts):
            return "Paris is the capital of France."

        good("capital of France?", ["Paris is the capital of France."])
        # Serverless style: delivered before returning, whatever the new topic's state.
        print(json.dumps({"flushed": tracescore.force_flush(timeout_s=60)}))
        tracescore.shutdown()
        """
    )
    sdk = run("-c", app)
    assert sdk.returncode == 0, sdk.stderr
    assert '{"flushed": true}' in sdk.stdout, sdk.stderr

    consume = run("-m", "tracescore.cli", "consume", "--idle-timeout", "3")
    assert consume.returncode == 0, consume.stderr
    assert "scored=1 " in consume.stderr and "evaluations=1 " in consume.stderr, consume.stderr

    alert = run("-m", "tracescore.cli", "alert", "--idle-timeout", "5")
    assert alert.returncode == 0, alert.stderr
    assert "records=1 " in alert.stderr, alert.stderr

    env["TRACESCORE_KAFKA__SASL_PASSWORD"] = "not-the-password"
    refused = run("-m", "tracescore.cli", "alert", "--idle-timeout", "5")
    assert refused.returncode == 1
    [line] = [line for line in refused.stderr.splitlines() if line.startswith("Error:")]
    assert line.startswith(f"Error: cannot connect to Kafka at {sasl_broker.sasl_bootstrap_servers}")
    assert "Check the security settings" in line  # what to do about it
    assert "not-the-password" not in refused.stderr
