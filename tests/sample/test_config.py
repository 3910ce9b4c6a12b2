"""Sampling configuration: files, environment and flags with one precedence, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracescore.sample import SamplingConfig, SamplingConfigError, load_sampling_config

TOML = """
[sampling]
default_rate = 0.5
rates = [
  { service = "checkout-*", rate = 0.2 },
  { service = "checkout-eu", route = "/ask", metric = "faithfulness", rate = 0.9 },
]
[sampling.rate_limit]
per_minute = 600
[sampling.llm_budget]
tokens_per_hour = 100000
tokens_per_day = 1000000
[sampling.cascade]
min_probability = 0.4
baseline_rate = 0.05
"""

YAML = """
default_rate: 0.25
filters:
  exclude:
    - attribute: deployment.environment
      values: ["staging*", "dev"]
offline:
  cpu_share: 0.5
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_toml_file_is_read_under_its_sampling_table(tmp_path: Path) -> None:
    config = load_sampling_config(write(tmp_path, "s.toml", TOML))
    assert config.default_rate == 0.5
    assert config.rate_limit.per_minute == 600
    assert (config.llm_budget.tokens_per_hour, config.llm_budget.tokens_per_day) == (100_000, 1_000_000)
    assert (config.cascade.min_probability, config.cascade.baseline_rate) == (0.4, 0.05)
    assert config.rate_for("checkout-eu", "/ask", "faithfulness") == 0.9
    assert config.rate_for("checkout-eu", "/ask", "context_relevance") == 0.2
    assert config.rate_for("search", "/ask", "faithfulness") == 0.5


def test_a_yaml_file_is_read_at_its_top_level(tmp_path: Path) -> None:
    config = load_sampling_config(write(tmp_path, "s.yaml", YAML))
    assert config.default_rate == 0.25
    assert config.filters.exclude[0].values == ("staging*", "dev")
    assert config.offline.cpu_share == 0.5
    # Untouched sections keep the defaults, which live in one place: the model.
    assert config.cascade == SamplingConfig().cascade


def test_flags_beat_environment_beat_file_beat_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "s.toml", TOML)
    monkeypatch.setenv("TRACESCORE_SAMPLING__DEFAULT_RATE", "0.7")
    monkeypatch.setenv("TRACESCORE_SAMPLING__CASCADE__MIN_PROBABILITY", "0.3")
    config = load_sampling_config(path, default_rate=0.1)
    assert config.default_rate == 0.1  # flag over environment and file
    assert config.cascade.min_probability == 0.3  # environment over file
    assert config.cascade.baseline_rate == 0.05  # file over default, next to an overridden sibling
    assert config.rate_limit.burst is None  # default
    monkeypatch.delenv("TRACESCORE_SAMPLING__DEFAULT_RATE")
    assert load_sampling_config(path).default_rate == 0.5


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("default_rate = 1.5\n", "default_rate: Input should be less than or equal to 1"),
        (
            "[cascade]\nmin_probabilty = 0.4\n",
            "cascade.min_probabilty: unknown setting 'min_probabilty' (did you mean 'min_probability'? "
            "valid: baseline_rate, enabled, escalate_errors, flag_verdicts, learning, lift, metric,",
        ),
        (
            "rates = [{ service = 'a', metric = 'faithfulness', rat = 0.5 }]\n",
            "rates.0.rat: unknown setting 'rat' (did you mean 'rate'? valid: metric, rate, route, service)",
        ),
        (
            "rates = [{ service = 'a', rate = -1 }]\n",
            "rates.0.rate: Input should be greater than or equal to 0",
        ),
        ("[llm_budget]\ntokens_per_hour = 5000\ntokens_per_day = 4000\n", "tokens_per_hour (5000) exceeds"),
        ("[llm_budget]\ntokens_per_hour = 500\n", "could never send anything"),
        ("[rate_limit]\nper_minute = 0\n", "rate_limit.per_minute: Input should be greater than 0"),
        ("default_rate = \n", "not valid TOML"),
    ],
)
def test_a_bad_file_gives_one_line_naming_the_file_and_key(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, "bad.toml", text)
    with pytest.raises(SamplingConfigError) as raised:
        load_sampling_config(path)
    message = str(raised.value)
    assert message.startswith(str(path)) and expected in message, message
    assert "\n" not in message


METRICS = ("answer_relevancy", "context_relevance", "faithfulness")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "rates = [{ metric = 'answer_relevance', rate = 0.1 }]\n",
            "rates.0.metric: unknown metric 'answer_relevance' (did you mean 'answer_relevancy'? valid: "
            "answer_relevancy, context_relevance, faithfulness)",
        ),
        ("rates = [{ metric = 'tone*', rate = 0.1 }]\n", "rates.0.metric: unknown metric 'tone*'"),
        ("[cascade]\nmetric = 'faithfulnes'\n", "cascade.metric: unknown metric 'faithfulnes' (did you mean"),
    ],
)
def test_a_rule_naming_a_metric_that_does_not_exist_fails_with_the_valid_names(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = write(tmp_path, "bad.toml", text)
    with pytest.raises(SamplingConfigError) as raised:
        load_sampling_config(path, known_metrics=METRICS)
    message = str(raised.value)
    assert message.startswith(str(path)) and expected in message, message


def test_metric_patterns_that_match_a_known_metric_are_accepted(tmp_path: Path) -> None:
    text = "rates = [{ metric = 'answer_*', rate = 0.1 }, { metric = 'faithfulness', rate = 0.5 }]\n"
    config = load_sampling_config(write(tmp_path, "ok.toml", text), known_metrics=METRICS)
    assert config.rate_for("svc", "/", "answer_relevancy") == 0.1


def test_missing_file_wrong_suffix_and_bad_yaml_are_one_line_errors(tmp_path: Path) -> None:
    for path, expected in [
        (tmp_path / "absent.toml", "cannot read the config file"),
        (write(tmp_path, "s.json", "{}"), "must be .toml, .yaml or .yml"),
        (write(tmp_path, "s.yaml", "rates: [unclosed\n"), "not valid YAML"),
        (write(tmp_path, "list.yaml", "- 1\n- 2\n"), "expected a table of settings"),
    ]:
        with pytest.raises(SamplingConfigError, match=expected) as raised:
            load_sampling_config(path)
        assert "\n" not in str(raised.value)


def test_a_bad_environment_value_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_SAMPLING__CASCADE__BASELINE_RATE", "lots")
    with pytest.raises(SamplingConfigError, match=r"cascade\.baseline_rate"):
        load_sampling_config()


def test_the_most_specific_rate_rule_wins_whatever_its_position() -> None:
    config = SamplingConfig(
        default_rate=1.0,
        rates=[
            {"service": "shop", "route": "/ask", "rate": 0.3},  # two exact fields
            {"service": "shop", "rate": 0.1},  # one exact field
            {"service": "sh*", "route": "/ask", "metric": "faithfulness", "rate": 0.6},  # 2 exact + a glob
            {"service": "shop", "route": "/a*", "rate": 0.2},  # exact + glob, fewer literals than /ask
            {"service": "shop", "route": "/ask", "rate": 0.4},  # same specificity as the first: first wins
        ],
    )
    assert config.rate_for("shop", "/ask", "faithfulness") == 0.6
    assert config.rate_for("shop", "/ask", "answer_relevancy") == 0.3
    assert config.rate_for("shop", "/about", "faithfulness") == 0.2
    assert config.rate_for("shop", "/other", "faithfulness") == 0.1
    assert config.rate_for("search", "/ask", "faithfulness") == 1.0


def test_the_documented_example_config_loads() -> None:
    # docs/sampling.md shows this file.
    config = load_sampling_config(Path(__file__).resolve().parents[2] / "docs" / "examples" / "sampling.toml")
    assert config.rate_for("search", "/ask", "faithfulness") == 0.1
    assert config.llm_budget.tokens_per_day == 2_000_000 and config.offline.cpu_share == 1.0
