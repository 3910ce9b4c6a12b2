"""Every command's --help sends a reader only to places that exist: "see the docs, A > B" names pages of the
docs site's navigation (mkdocs.yml), "see README, X" a heading of the README."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from tracescore.cli import main
from tracescore.score.judges import OpenAIJudgeSettings

ROOT = Path(__file__).parents[2]


def _nav_titles(entries: list[object], trail: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    titles: set[tuple[str, ...]] = set()
    for entry in entries:
        if isinstance(entry, dict):
            for title, target in entry.items():
                titles.add((*trail, title))
                if isinstance(target, list):
                    titles |= _nav_titles(target, (*trail, title))
    return titles


def _help_texts() -> dict[str, str]:
    assert isinstance(main, click.Group)
    runner = CliRunner()
    texts = {"tracescore": runner.invoke(main, ["--help"], terminal_width=10_000).output}
    for name in main.commands:
        texts[name] = runner.invoke(main, [name, "--help"], terminal_width=10_000).output
    return texts


HELP = _help_texts()


@pytest.mark.parametrize("command", sorted(HELP))
def test_help_points_only_to_pages_and_sections_that_exist(command: str) -> None:
    # From `nav:` on: the part of mkdocs.yml before it holds tags plain YAML does not read.
    nav = yaml.safe_load("nav:" + (ROOT / "mkdocs.yml").read_text().split("\nnav:", 1)[1])["nav"]
    pages = _nav_titles(nav)
    readme = {
        line.lstrip("#").strip() for line in (ROOT / "README.md").read_text().splitlines() if line[:2] == "##"
    }
    text = " ".join(HELP[command].split())
    for reference in re.findall(r"see the docs, ([^;\].)]+)", text):
        path = tuple(part.strip() for part in reference.split(">"))
        assert path in pages, (
            f"tracescore {command} --help sends readers to a page not on the site: {reference!r}"
        )
    for section in re.findall(r"see README, ([^;\].)]+)", text):
        assert section.strip() in readme, (
            f"tracescore {command} --help names a README section it lacks: {section!r}"
        )
    assert "see README)" not in text, f"tracescore {command} --help says 'see README' without a section"


@pytest.mark.parametrize("command", sorted(c for c in HELP if "--judge" in HELP[c] and "--model" in HELP[c]))
def test_help_shows_the_model_an_llm_judge_uses_without_model(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--judge openai` alone judges with the settings' default model: the help says which (read from the
    settings, where the default is written)."""
    monkeypatch.delenv("TRACESCORE_JUDGE_MODEL", raising=False)
    default = OpenAIJudgeSettings().model
    text = " ".join(HELP[command].split())
    assert f"Judge model (openai judge). [env: TRACESCORE_JUDGE_MODEL; default: {default}]" in text, text


@pytest.mark.parametrize("command", sorted(HELP))
def test_help_names_each_variable_in_one_form(command: str) -> None:
    """`[env: NAME]` everywhere: click's own `[env var: NAME]` and a hand-written `(env NAME)` read as two
    different things next to it."""
    text = " ".join(HELP[command].split())
    assert "env var" not in text and "(env " not in text and "; env " not in text, text
    chosen = main.commands.get(command, main)
    for option in (p for p in chosen.params if isinstance(p, click.Option) and isinstance(p.envvar, str)):
        assert f"[env: {option.envvar}" in " ".join((option.help or "").split()), option.opts


def test_the_command_list_says_what_each_command_does_without_cutting_it_short() -> None:
    """At a terminal's 80 columns `tracescore --help` lists every command in a whole phrase (click cut each
    first sentence with "..."), after a paragraph that says which command reads what."""
    text = CliRunner().invoke(main, ["--help"], terminal_width=80).output
    listed = text.split("Commands:\n", 1)[1].splitlines()
    assert len(listed) == len(main.commands) and not [line for line in listed if line.endswith("...")], text
    assert "`consume` scores them" in " ".join(text.split())


def _option_help(command: str, option: str) -> str:
    """The help of `option` in `tracescore command --help`, on one line."""
    options = " ".join(HELP[command].split()).split(" Options: ", 1)[1]
    return options.split(f"{option} ", 1)[1].split(" --", 1)[0]


def test_tail_s_evaluations_topic_says_it_reads_the_records() -> None:
    """It said "Where evaluation records go", the shared setting's words for consume, in a command that
    reads them."""
    assert _option_help("tail", "--evaluations-topic").startswith(
        "TEXT The topic of the evaluation records: consume writes them there, tail reads them."
    )
    assert "go." not in _option_help("consume", "--evaluations-topic")


def test_connect_timeout_says_one_default_and_one_unit_in_every_command() -> None:
    """Its default read 30.0 in consume's and tail's help (generated from the setting) and 30 in alert's and
    conversations' (a flag of their own), with "within this time" and no unit."""
    helps = {
        # (click adds its range check's `[x>0]` where the flag declares the range itself)
        command: _option_help(command, "--connect-timeout")
        .split(" ", 1)[1]
        .removeprefix("RANGE ")
        .removesuffix(" [x>0]")
        for command in ("alert", "consume", "conversations", "tail")
    }
    assert set(helps.values()) == {
        "Give up with an error if no broker answers within this many seconds. [env: "
        "TRACESCORE_CONNECT_TIMEOUT_S; default: 30]"
    }, helps


def test_alert_s_help_says_what_runs_without_a_config_as_the_start_line_says_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without --config the service runs a default rule and a log sink, said only in the line it starts
    with: the help says the same words, from the defaults (not this shell's environment)."""
    from tracescore.alert import load_alert_config, make_sink, start_line

    for name in ("TRACESCORE_ALERT_CONFIG", "TRACESCORE_ALERT_RULES", "TRACESCORE_ALERT_SINKS"):
        monkeypatch.delenv(name, raising=False)
    config = load_alert_config()
    said = start_line(config, [make_sink(sink) for sink in config.sinks])
    assert f"Without one: {said}. [env: TRACESCORE_ALERT_CONFIG]" in _option_help("alert", "--config"), said


@pytest.mark.parametrize("command", ["consume", "tail", "alert", "conversations"])
def test_a_missing_config_file_is_named_alike_by_every_command(tmp_path: Path, command: str) -> None:
    """One mistake, one message, whichever command was given the file."""
    result = CliRunner().invoke(main, [command, "--config", str(tmp_path / "missing.toml")])
    assert result.exit_code == 2, result.output
    assert "missing.toml: cannot read the config file (No such file or directory)" in result.output


@pytest.mark.parametrize("command", ["consume", "conversations"])
def test_a_bad_phoenix_variable_is_one_usage_line_naming_it(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACESCORE_PHOENIX_TIMEOUT_S", "-1")
    result = CliRunner().invoke(main, [command, "--phoenix-endpoint", "http://127.0.0.1:6006"])
    assert result.exit_code == 2, result.output
    assert "invalid value for TRACESCORE_PHOENIX_TIMEOUT_S: Input should be greater than 0" in result.output
    assert "Traceback" not in result.output
