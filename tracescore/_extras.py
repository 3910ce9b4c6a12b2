"""How to install an optional extra, said one way wherever a missing extra is reported."""

from __future__ import annotations


def install_line(extra: str) -> str:
    # tracescore is installed from a checkout (or a wheel built from it) until it is published on PyPI.
    return f"pip install '.[{extra}]' in a tracescore checkout"
