"""The command-line reference, from the click commands themselves: every command, argument and option, with
its type, default, environment variable and help."""

from __future__ import annotations

import re
from collections.abc import Iterator

import click

from gen import GENERATED, Undocumented, cell, code, table

# "[env: NAME ...]", as every option's help says it (tracescore.cli._options.env_note).
_ENV_IN_HELP = re.compile(r"\[env: ((?:TRACESCORE|OPENAI|OTEL|PHOENIX)_[A-Z0-9_]+)\b")
# The same note closing the help of an option click reads a variable for: "[env: NAME; default: D]".
_ENV_NOTE = re.compile(r"\s*\[env: (?P<name>[A-Z0-9_]+)(?:; default: (?P<default>[^\]]*))?\]$")


def commands() -> Iterator[tuple[str, click.Command]]:
    """('tracescore', the group), then ('tracescore <name>', command) in name order, nested groups too."""
    from tracescore.cli import main

    def walk(prefix: str, command: click.Command) -> Iterator[tuple[str, click.Command]]:
        yield prefix, command
        if isinstance(command, click.Group):
            for name in sorted(command.commands):
                yield from walk(f"{prefix} {name}", command.commands[name])

    yield from walk("tracescore", main)


def environment_names(param: click.Parameter) -> list[str]:
    """The variables an option reads: its click envvar, or the ones its help names ([env: ...])."""
    declared = param.envvar if isinstance(param.envvar, list | tuple) else [param.envvar]
    names = [name for name in declared if name]
    help_text = getattr(param, "help", None) or ""
    return names + [name for name in _ENV_IN_HELP.findall(help_text) if name not in names]


def split_env_note(help_text: str, variable: str) -> tuple[str, str]:
    """(the help without its closing note on `variable`, the default the note gives or ""): for a table
    that shows the variable and the default in columns of their own."""
    note = _ENV_NOTE.search(help_text)
    if note is None or note["name"] != variable:
        return help_text, ""
    return help_text[: note.start()], note["default"] or ""


def _type(param: click.Parameter) -> str:
    if isinstance(param, click.Option) and param.is_flag and not param.secondary_opts:
        return "flag"
    if isinstance(param.type, click.Choice):
        return " | ".join(str(choice) for choice in param.type.choices)
    kind = param.type
    if isinstance(kind, click.IntRange | click.FloatRange):
        bounds = [f"{'>' if kind.min_open else '≥'} {kind.min}"] if kind.min is not None else []
        bounds += [f"{'<' if kind.max_open else '≤'} {kind.max}"] if kind.max is not None else []
        return f"{'integer' if isinstance(kind, click.IntRange) else 'float'} {', '.join(bounds)}"
    return kind.name


def _default(param: click.Parameter) -> str:
    default = param.default
    if default is None or (isinstance(param, click.Option) and param.is_flag and default is False):
        return ""
    # click 8.2+ marks "no default" with a sentinel object; a callable default is computed at run time.
    if callable(default) or type(default).__name__ == "Sentinel":
        return ""
    return code(default)


def _names(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        return code(param.human_readable_name)
    return ", ".join(code(opt) for opt in [*param.opts, *param.secondary_opts])


def page() -> str:
    problems: list[str] = []
    out = [
        GENERATED,
        "# Command line\n\n",
        "Every `tracescore` command, argument and option, as `tracescore COMMAND --help` shows them. Flags "
        "win over environment variables, which win over a `--config` file, which wins over the defaults; "
        "[Settings](settings.md) lists every setting with its variable.\n",
    ]
    for name, command in commands():
        help_text = (command.help or "").strip()
        if not help_text:
            problems.append(f"`{name}` has no help text")
        ctx = click.Context(command, info_name=name)
        usage = " ".join(command.collect_usage_pieces(ctx))
        out.append(f"\n## `{name}`\n\n```text\n{name} {usage}\n```\n\n{_paragraphs(help_text)}\n")
        rows = []
        for param in command.params:
            if isinstance(param, click.Option) and param.hidden:
                continue
            param_help = getattr(param, "help", None) or ""
            if isinstance(param, click.Option) and not param_help:
                problems.append(f"`{name} {param.opts[0]}` has no help text")
            envs = ", ".join(code(env) for env in environment_names(param))
            rows.append([_names(param), cell(_type(param)), _default(param), envs, cell(param_help)])
        if isinstance(command, click.Group):
            rows.append([code("--help"), "flag", "", "", "Show the help and exit."])
            out.append("\n" + table(["Option", "Type", "Default", "Environment", "Description"], rows))
            out.append("\nCommands: " + ", ".join(f"`{n}`" for n in sorted(command.commands)) + ".\n")
        elif rows:
            out.append("\n" + table(["Option", "Type", "Default", "Environment", "Description"], rows))
    if problems:
        raise Undocumented(problems)
    return "".join(out)


def _paragraphs(text: str) -> str:
    """click's docstring layout (one paragraph per blank-line block) as Markdown."""
    blocks = [" ".join(block.split()) for block in re.split(r"\n\s*\n", text) if block.strip()]
    return "\n\n".join(blocks)
