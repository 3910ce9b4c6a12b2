"""The README's install lines, run as written in a fresh virtualenv: from a copy of a checkout, and from the
wheel they build there. tracescore is not published on PyPI yet, so the README must not send a newcomer to
`pip install tracescore`; what it says instead must give a working `tracescore` command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from test_bare_install import PIP_TIMEOUT_S, REPO, checkout_copy


def install_blocks(readme: str) -> list[str]:
    """The shell blocks of the README's Install section."""
    section = readme.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def _shell(block: str, cwd: Path, venv: Path) -> None:
    """A block run as a person pastes it into a shell whose virtualenv is active."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "TRACESCORE_"))}
    env |= {"VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    # Not what is checked here: the bytecode of every package installed (an eighth of pip's CPU; Python
    # compiles what it imports). PIP_COMPILE=0, not PIP_NO_COMPILE=1: pip reads its --no-* options' variables
    # inverted ("falsy values have to be used"), so PIP_NO_COMPILE=1 would still compile.
    env["PIP_COMPILE"] = "0"
    done = subprocess.run(
        ["bash", "-e", "-c", block],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"the README's\n{block}\nfailed:\n{done.stdout}\n{done.stderr}"


def _installed_command(venv: Path, elsewhere: Path) -> str:
    """`tracescore --version` from outside the checkout: the installed package, not the copy's sources."""
    done = subprocess.run(
        [str(venv / "bin" / "tracescore"), "--version"],
        cwd=elsewhere, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_install_section_names_no_package_that_is_not_published() -> None:
    blocks = install_blocks((REPO / "README.md").read_text(encoding="utf-8"))
    assert blocks, "the README has an Install section with its commands"
    assert not [b for b in blocks if re.search(r"pip install +'?tracescore\b", b)], blocks


def test_the_readme_install_lines_give_a_working_command(tmp_path: Path) -> None:
    checkout, elsewhere = checkout_copy(tmp_path / "clone"), tmp_path / "elsewhere"
    elsewhere.mkdir()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=PIP_TIMEOUT_S)
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    from_clone, from_wheel = install_blocks((REPO / "README.md").read_text(encoding="utf-8"))

    _shell(from_clone, checkout, venv)
    assert _installed_command(venv, elsewhere) == f"tracescore, version {version}"

    # The same virtualenv without the package: the wheel's line must install it (its dependencies are
    # already there, so this part costs a build).
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", "tracescore"], check=True
    )
    with pytest.raises(FileNotFoundError):
        _installed_command(venv, elsewhere)
    _shell(from_wheel, checkout, venv)
    assert _installed_command(venv, elsewhere) == f"tracescore, version {version}"
