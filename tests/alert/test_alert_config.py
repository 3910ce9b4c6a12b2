"""The alert config file: impossible settings and unknown metrics are clear errors; flags > env > file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracescore.alert import AlertConfigError, WebhookSinkConfig, load_alert_config, make_sink, start_line


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "alert.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            "metric: faithfulnes",
            "rules.0.metric: unknown metric 'faithfulnes' (did you mean 'faithfulness'? valid: "
            "answer_relevancy, context_relevance, distinct_2, faithfulness, goal_completion, quality,",
        ),
        ("warning: 0.5\n    critical: 0.6", "critical (0.6) must be below warning (0.5)"),
        ("min_samples: 30\n    window_count: 20", "min_samples (30) exceeds window_count (20)"),
        ("warning: 1.5", "rules.0.warning: Input should be less than or equal to 1"),
        ("warning: 0.98\n    hysteresis: 0.05\n    critical: null", "could never resolve"),
        ("confidence: 1.0", "rules.0.confidence"),
        (
            "treshold: 0.7",
            "rules.0.treshold: unknown setting 'treshold' (valid: confidence, cooldown_seconds,",
        ),
        ("metirc: faithfulness", "rules.0.metirc: unknown setting 'metirc' (did you mean 'metric'?"),
    ],
)
def test_impossible_rules_are_one_clear_error(tmp_path: Path, rule: str, message: str) -> None:
    with pytest.raises(AlertConfigError) as caught:
        load_alert_config(write(tmp_path, f"rules:\n  - {rule}\n"))
    assert message in str(caught.value)
    assert str(tmp_path / "alert.yaml") in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            "drop:\n      window_count: 1000\n      normal_count: 1000",
            "drop.normal_count (1000) must be at least twice drop.window_count (1000): the normal is the "
            "route's longer history",
        ),
        ("drop:\n      min_drop: -0.1", "drop.min_drop (-0.1) must be above 0 and below 1"),
        ("drop:\n      min_drop: 0", "drop.min_drop (0.0) must be above 0 and below 1"),
        ("drop:\n      min_drop: 1.5", "drop.min_drop (1.5) must be above 0 and below 1"),
        (
            "drop:\n      min_drop: 0.1\n      critical_drop: 0.05",
            "drop.critical_drop (0.05) must be larger than drop.min_drop (0.1)",
        ),
        ("warning: null\n    critical: null", "no warning threshold and no drop: it could never fire"),
        ("warning: null\n    drop: {}", "critical (0.5) needs a warning threshold above it"),
        (
            "window_count: 500\n    drop:\n      window_count: 200\n      normal_count: 2000",
            "drop.window_count (200) is below window_count (500)",
        ),
        (
            "drop:\n      window_seconds: 86400\n      normal_seconds: 3600",
            "drop.normal_seconds (3600.0) is shorter than drop.window_seconds (86400.0)",
        ),
        ("drop:\n      min_normal_samples: 8000", "drop.min_normal_samples (8000) exceeds drop.normal_count"),
        ("drop:\n      confidence: 1", "rules.0.drop.confidence"),
        (
            "window_count: 20000\n    drop:\n      window_count: 20000\n      normal_count: 40000",
            "window_count (20000) above 10000 with a drop part",
        ),
        ("drop:\n      minimum_drop: 0.1", "rules.0.drop.minimum_drop: unknown setting 'minimum_drop'"),
        (
            "require_calibration: true",
            "require_calibration needs a drop part: with the offline judge alone nothing else would watch",
        ),
        (
            "warning: null\n    critical: null\n    drop: {}\n    require_calibration: true",
            "require_calibration needs a warning threshold to apply",
        ),
        (
            "require_calibration: maybe\n    drop: {}",
            "rules.0.require_calibration: Input should be a valid boolean",
        ),
    ],
)
def test_impossible_drop_rules_are_one_clear_error(tmp_path: Path, rule: str, message: str) -> None:
    with pytest.raises(AlertConfigError) as caught:
        load_alert_config(write(tmp_path, f"rules:\n  - {rule}\n"))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_drop_only_rule_reads_with_its_defaults(tmp_path: Path) -> None:
    config = load_alert_config(
        write(tmp_path, "rules:\n  - warning: null\n    critical: null\n    drop: {}\n")
    )
    rule = config.rules[0]
    assert rule.warning is None and rule.drop is not None
    assert rule.drop.normal_count >= 2 * rule.drop.window_count


def test_a_misspelt_sink_field_names_the_sinks_valid_fields(tmp_path: Path) -> None:
    with pytest.raises(AlertConfigError) as caught:
        load_alert_config(write(tmp_path, "sinks:\n  - type: webhook\n    url: http://x\n    timeout: 3\n"))
    assert (
        "sinks.0.webhook.timeout: unknown setting 'timeout' (did you mean 'timeout_seconds'? valid: "
        in str(caught.value)
    )


def test_custom_metrics_are_accepted_when_declared(tmp_path: Path) -> None:
    config = load_alert_config(write(tmp_path, "extra_metrics: [tone]\nrules:\n  - metric: tone\n"))
    assert config.rules[0].metric == "tone"


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(AlertConfigError, match=r"nope.yaml: cannot read the config file \(No such file"):
        load_alert_config(tmp_path / "nope.yaml")


def test_flags_beat_environment_beat_file_beat_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(
        tmp_path, "group_id: from-file\nevaluations_topic: file-topic\nbootstrap_servers: file:9092\n"
    )
    monkeypatch.setenv("TRACESCORE_ALERT_EVALUATIONS_TOPIC", "env-topic")
    monkeypatch.setenv("TRACESCORE_ALERT_BOOTSTRAP_SERVERS", "env:9092")
    config = load_alert_config(path, bootstrap_servers="flag:9092", group_id=None)
    assert config.bootstrap_servers == "flag:9092"
    assert config.evaluations_topic == "env-topic"
    assert config.group_id == "from-file"
    assert config.state_topic == "from-file.routes.changelog"  # the group's own (tests/test_config_files.py)


def test_sinks_and_rules_are_read_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(
        tmp_path,
        """
rules:
  - routes: ["/billing*"]
    warning: 0.8
  - warning: 0.6
sinks:
  - type: log
  - type: webhook
    url: http://127.0.0.1:9/hook
    secret_env: HOOK_SECRET
""",
    )
    config = load_alert_config(path)
    assert config.rule_for("bot", "/billing/eu", "faithfulness").warning == 0.8
    assert config.rule_for("bot", "/support", "faithfulness").warning == 0.6
    assert config.rule_for("bot", "/support", "answer_relevancy") is None
    assert isinstance(config.sinks[1], WebhookSinkConfig)
    assert config.sinks[1].secret_env == "HOOK_SECRET"


@pytest.mark.parametrize(
    "metric",
    [
        *("tool_errors", "ungrounded_answer", "unused_tool_results", "repeated_tool_calls", "run_budget"),
        *("tool_selection", "goal_completion"),
    ],
)
def test_the_agent_run_metrics_are_known_without_declaring_them(tmp_path: Path, metric: str) -> None:
    config = load_alert_config(write(tmp_path, f"rules:\n  - metric: {metric}\n"))
    assert config.rules[0].metric == metric


def test_the_start_line_says_which_rules_and_sinks_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After a rule is changed and the service restarted, its first line says what it now runs: in the
    # order they match, each rule's routes and what pages; the sinks without a URL's path (a Slack secret).
    # The no-data alert pages too (on a platform of quiet tenants, the most), so it is named; null: not.
    monkeypatch.setenv("HOOK_SECRET", "s3cret")
    config = load_alert_config(
        write(
            tmp_path,
            "rules:\n"
            "  - services: [support-bot]\n    routes: [/billing]\n    warning: null\n    critical: null\n"
            "    drop: {min_drop: 0.15, critical_drop: 0.3}\n    no_data_seconds: null\n"
            "  - signal: score\n    drop: {}\n    no_data_seconds: 7200\n"
            "sinks:\n  - type: log\n"
            "  - type: slack\n    url: https://hooks.slack.com/services/T0/B0/secret\n"
            "  - type: webhook\n    url: http://hooks.internal:8080/tracescore\n"
            "    secret_env: HOOK_SECRET\n",
        )
    )
    assert start_line(config, [make_sink(s) for s in config.sinks]) == (
        "rules, the first matching applies: "
        "1. faithfulness of support-bot /billing: the newest 2000 against the 7000 before them (its normal), "
        "drop 0.15 (critical 0.3); "
        "2. faithfulness (signal score) of every service and route: warning 0.7, critical 0.5, "
        "over the newest 50 answers (at least 10), and the newest 2000 against the 7000 before them (its "
        "normal), drop 0.02, and no data for 2 hours; "
        "a route no rule matches is not watched | "
        "sinks: log, slack at https://hooks.slack.com, webhook at http://hooks.internal:8080"
    )


def test_without_rules_the_default_rule_waits_for_calibration_and_watches_drops(tmp_path: Path) -> None:
    # On the offline judge alone a healthy route of long answers reads 0.5: the default must not page it on
    # 0.7, and says so in its start line; a rule written out keeps its thresholds on every estimate.
    config = load_alert_config(write(tmp_path, "sinks:\n  - type: log\n"))
    said = start_line(config, [make_sink(s) for s in config.sinks])
    alerting = Path(__file__).parents[2] / "docs" / "alerting" / "index.md"
    assert f"INFO tracescore.alert: {said}\n" in alerting.read_text(encoding="utf-8")  # the page shows it
    assert said == (
        "rules, the first matching applies: 1. faithfulness of every service and route: warning 0.7, "
        "critical 0.5 once calibrated (10 baseline pairs of the LLM judge), over the newest 50 answers (at "
        "least 10), and the newest 2000 against the 7000 before them (its normal), drop 0.02, and no data "
        "when the route's silence is unusual for it (as rare as 1 in 1,000,000 at its rate, and at least 30 "
        "minutes); a route no rule matches is not watched | sinks: log"
    )
    (explicit,) = load_alert_config(write(tmp_path, "rules:\n  - warning: 0.7\n")).rules
    assert (explicit.require_calibration, explicit.drop) == (False, None)


def test_one_pattern_may_be_written_without_a_list(tmp_path: Path) -> None:
    # `routes: /billing` is what a person writes for one route; it was "Input should be a valid list".
    config = load_alert_config(write(tmp_path, "rules:\n  - services: support-bot\n    routes: /billing*\n"))
    assert config.rule_for("support-bot", "/billing/refunds", "faithfulness") is not None
    assert config.rule_for("support-bot", "/search", "faithfulness") is None
    assert config.rule_for("docs-bot", "/billing", "faithfulness") is None
