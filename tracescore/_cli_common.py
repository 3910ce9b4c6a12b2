"""What the `tracescore` commands share."""

from __future__ import annotations

from typing import Any

import click

__all__ = ["or_usage_error"]


def or_usage_error(factory: Any, *args: Any, **kwargs: Any) -> Any:
    """`factory(...)`, its ValueError shown as a usage error (one line, exit status 2)."""
    try:
        return factory(*args, **kwargs)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
