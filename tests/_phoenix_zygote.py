"""The tests' Phoenix servers forked from one interpreter that already imported Phoenix (issue 33 item 4).

A `phoenix serve` spends ~10 of its ~13 CPU-s of start importing Phoenix (its API, its agents' and
playground's LLM clients, grpc, pandas). The suite starts several: the shared `phoenix_server`, and one of
their own for each test that stops, restarts or freezes its Phoenix. A zygote (tests/_zygote.py) on Phoenix's
own interpreter runs those imports once; each server is a child forked from it, running Phoenix's own
`phoenix` script with `serve`, its own environment, working directory, ports and log, as a started one would.

What Phoenix computes at import from the variables each server sets anew is computed again in the child
(`SETUP`): phoenix.config's working-directory paths (and the folders it makes there at import). The host and
port it reads at import only make the default of a field that `serve` always gives. Any other variable read
at import that differs from the zygote's starts the server the ordinary way (`subprocess.Popen`).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from _zygote import Zygote, popen

from tracescore.testing.phoenix import PhoenixServer, install_phoenix

__all__ = ["phoenix_spawn"]

PRELOAD = """
import phoenix.server.main
import phoenix.server.app
import phoenix.server.cli.commands.serve
"""

# Read at import by phoenix.config (its paths), phoenix.db.models (SQLite or not: every test server's is) and
# phoenix.server.app (ScaffolderConfig's default URL, which serve always passes); these and the gRPC port also
# by the modules that copy the whole environment at import for their own prefixes (fastmcp's settings, tqdm,
# wsgiref).
SET_IN_CHILD = ("PHOENIX_WORKING_DIR", "PHOENIX_HOST", "PHOENIX_PORT", "PHOENIX_GRPC_PORT")

# In the child, its environment set: phoenix.config's paths for its own working directory, rebound wherever
# a phoenix module holds the zygote's (`from phoenix.config import TRACE_DATASETS_DIR`), and its folders made.
SETUP = """
import sys
import phoenix.config as config

old = {name: getattr(config, name) for name in ("WORKING_DIR", "ROOT_DIR", "INFERENCES_DIR",
                                                 "TRACE_DATASETS_DIR", "WASM_DIR")}
config.WORKING_DIR = config.get_working_dir()
config.ROOT_DIR = config.RestrictedPath(config.WORKING_DIR)
config.INFERENCES_DIR = config.RestrictedPath(config.WORKING_DIR / "inferences")
config.TRACE_DATASETS_DIR = config.RestrictedPath(config.WORKING_DIR / "trace_datasets")
config.WASM_DIR = config.RestrictedPath(config.WORKING_DIR / "wasm")
names = {id(value): name for name, value in old.items()}
for module in list(sys.modules.values()):
    if getattr(module, "__name__", "").startswith("phoenix"):
        for key, value in list(vars(module).items()):
            name = names.get(id(value))
            if name is not None and value is old[name]:
                setattr(module, key, getattr(config, name))
config.ensure_working_dir_if_needed()
"""


def phoenix_spawn(stack: ExitStack) -> Callable[..., Any]:
    """A `PhoenixServer.spawn` forking from a zygote of Phoenix started now (stopped with `stack`)."""
    python = str(install_phoenix().parent / "python")
    folder = Path(tempfile.mkdtemp(prefix="tracescore-phoenix-zygote-"))
    stack.callback(shutil.rmtree, folder, ignore_errors=True)
    # The environment a server of PhoenixServer gets, its folder and ports aside (SET_IN_CHILD).
    env = PhoenixServer(working_dir=folder, port=0, grpc_port=0)._environment()
    zygote = Zygote(PRELOAD, env, python=python, setup=SETUP, set_in_child=SET_IN_CHILD)
    stack.callback(zygote.close)

    def spawn(command: list[str], *, env: dict[str, str], **popen_args: Any) -> Any:
        if zygote.differs(env):  # a variable read at import set otherwise: Phoenix started the ordinary way
            return subprocess.Popen(command, env=env, **popen_args)
        return popen([python, *command], env=env, zygote=zygote, **popen_args)

    return spawn
