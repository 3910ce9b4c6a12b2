"""What a fixture recording runs (fixtures/record.py) ends with the process that started it, however that
process ends: a server a scenario program runs beside the library it records (the Spring AI app's JVM, the
LiteLLM proxy, the Collector: scenarios/_server_process.py), with the program's scratch folder."""

from __future__ import annotations

from pathlib import Path

from _helpers import ends_with_its_owner

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"

# A scenario program in an env without tracescore (as LiteLLM's): an interpreter without site-packages (-I -S,
# exec'd in place: the same process, its pipes kept) starts a stand-in server, which serves the program's
# scratch folder (the marker), through server_process; it reports and waits.
_PROGRAM = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, {scenarios!r})
assert "tracescore" not in sys.modules
from _server_process import free_port, server_process

scratch = Path(tempfile.mkdtemp(prefix="tracescore-recording-"))
port = free_port()
command = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(scratch)]

def answers():
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{{port}}/", timeout=2):
            return True
    except OSError:
        return False

with server_process(command, what="the server", log=scratch / "server.log", ready=answers, timeout_s=60,
                    remove=[scratch]) as server:
    print(json.dumps({{"pid": server.pid, "folder": str(scratch), "marker": str(scratch)}}), flush=True)
    sys.stdin.read()
"""
_OWNER = "import os, sys; os.execv(sys.executable, [sys.executable, '-I', '-S', '-c', {program!r}])"


def test_a_recording_server_ends_with_its_program_however_the_program_is_killed() -> None:
    """record.py kills a scenario program that overruns its time (and the program's own guard kills it when
    record.py is killed): its servers ran on for good, their ports taken, its scratch folder left."""
    program = _PROGRAM.format(scenarios=str(SCENARIOS))
    ends_with_its_owner(_OWNER.format(program=program), "the recording's server")
