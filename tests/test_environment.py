"""A variable in tracescore's prefix that no setting reads is found, with the valid name most like it."""

from __future__ import annotations

import pytest
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tracescore._environment import misspelt_variables, variables_named, variables_read
from tracescore.alert import AlertConfig, WebhookSinkConfig
from tracescore.consume import ConsumerSettings
from tracescore.sample import SamplingConfig
from tracescore.score.judges import OpenAIJudgeSettings


class _Judge(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TRACESCORE_JUDGE_")

    model: str = Field(default="m", description="Judge model.")


MODELS = [ConsumerSettings, _Judge]


@pytest.mark.parametrize(
    ("misspelt", "meant"),
    [
        ("TRACESCORE_BROKER", "TRACESCORE_BOOTSTRAP_SERVERS"),  # the thing meant: its description names it
        ("TRACESCORE_BOOTSTRAP_SERVER", "TRACESCORE_BOOTSTRAP_SERVERS"),
        ("TRACESCORE_GROUPID", "TRACESCORE_GROUP_ID"),
        ("TRACESCORE_TOPICS", "TRACESCORE_TOPIC"),
        ("TRACESCORE_IDLE_TIMEOUT", "TRACESCORE_IDLE_TIMEOUT_S"),
        ("TRACESCORE_ASEMBLY__GRACE_S", "TRACESCORE_ASSEMBLY__GRACE_S"),  # nested: compared with nested
        ("tracescore_groupid", "TRACESCORE_GROUP_ID"),  # the settings read names in any case
    ],
)
def test_a_misspelt_variable_is_found_with_the_name_meant(misspelt: str, meant: str) -> None:
    assert misspelt_variables([misspelt], MODELS) == {misspelt.upper(): meant}


def test_a_name_like_no_setting_is_found_without_a_guess() -> None:
    assert misspelt_variables(["TRACESCORE_WEBHOOK_SECRET"], MODELS) == {"TRACESCORE_WEBHOOK_SECRET": None}


def test_valid_names_and_names_that_are_not_ours_are_left_alone() -> None:
    environ = [
        "TRACESCORE_TOPIC", "tracescore_group_id", "TRACESCORE_ASSEMBLY__GRACE_S", "TRACESCORE_KAFKA__ACKS",
        "TRACESCORE_JUDGE_MODEL",  # a settings group's longer prefix, valid
        "TRACESCORE_ALERT_GROUPID",  # a prefix left unchecked: the service's own to check
        "TRACESCORE_PROMETHEUS_PORT",  # read by an option, given in `also`
        "KAFKA_BROKER", "HOME", "OTEL_SERVICE_NAME",  # outside the prefix
    ]  # fmt: skip
    also = {"TRACESCORE_PROMETHEUS_PORT": "port"}
    assert misspelt_variables(environ, MODELS, also=also, unchecked=["TRACESCORE_ALERT_"]) == {}


def test_a_misspelt_variable_under_a_settings_group_s_prefix_is_found_with_that_group_s_name() -> None:
    """TRACESCORE_JUDGE_MODLE was left alone (a longer prefix was taken for another command's), so the judge
    ran with its default model, silently. It is compared with the group's own names: not with
    TRACESCORE_TOPIC or TRACESCORE_MODE."""
    environ = ["TRACESCORE_JUDGE_MODLE", "TRACESCORE_JUDGE_API_KYE", "TRACESCORE_SAMPLING__DEFAULT_RAT"]
    models = [ConsumerSettings, OpenAIJudgeSettings, SamplingConfig]
    assert misspelt_variables(environ, models) == {
        "TRACESCORE_JUDGE_MODLE": "TRACESCORE_JUDGE_MODEL",
        "TRACESCORE_JUDGE_API_KYE": "TRACESCORE_JUDGE_API_KEY",
        "TRACESCORE_SAMPLING__DEFAULT_RAT": "TRACESCORE_SAMPLING__DEFAULT_RATE",
    }


def test_the_variables_a_settings_class_reads_include_nested_ones_and_aliases() -> None:
    read = variables_read(OpenAIJudgeSettings)
    assert {"TRACESCORE_JUDGE_MODEL", "TRACESCORE_JUDGE_API_KEY", "OPENAI_API_KEY"} <= set(read)
    nested = variables_read(ConsumerSettings)
    assert {"TRACESCORE_ASSEMBLY", "TRACESCORE_ASSEMBLY__GRACE_S", "TRACESCORE_KAFKA__SASL_USERNAME"} <= set(
        nested
    )


def test_the_variables_a_config_names_are_found_at_any_depth() -> None:
    config = AlertConfig(
        sinks=[
            WebhookSinkConfig(url="http://127.0.0.1:9/a", secret_env="TRACESCORE_ALERT_HOOK_KEY"),
            WebhookSinkConfig(url="http://127.0.0.1:9/b", secret_env="my_hook_key"),
            WebhookSinkConfig(url="http://127.0.0.1:9/c", secret="inline"),
        ]
    )
    assert variables_named(config) == {"TRACESCORE_ALERT_HOOK_KEY", "MY_HOOK_KEY"}
    assert variables_named(ConsumerSettings()) == set()
