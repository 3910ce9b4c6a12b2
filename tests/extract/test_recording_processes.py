"""What a fixture recording runs (fixtures/record.py) ends with the process that started it, however that
process ends: the scenario program record.py runs (peers.py's `run`), with the folder it records into, and a
server a scenario program runs beside the library it records (the Spring AI app's JVM, the LiteLLM proxy, the
Collector: scenarios/_guarded.py), with the program's scratch folder."""

from __future__ import annotations

from pathlib import Path

from _helpers import ends_with_its_owner

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCENARIOS = FIXTURES / "scenarios"

# record.py's run of a scenario program, in a thread (it waits for the program), the folder it records into
# (the marker) to remove; reported once the program and its watchdog run (both name the folder).
_RECORDER = """
import json, os, sys, tempfile, threading, time
from pathlib import Path
sys.path.insert(0, {fixtures!r})
from peers import run

scratch = Path(tempfile.mkdtemp(prefix="tracescore-recording-"))
program = [sys.executable, "-c", "import time; time.sleep(600)", str(scratch)]
threading.Thread(target=run, args=("scenario", program), kwargs={{"timeout": 600, "remove": [scratch]}},
                 daemon=True).start()

def children():
    found = {{}}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:  # a process of another test may end between the listing and the reads
            parent = int(Path(f"/proc/{{pid}}/stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = Path(f"/proc/{{pid}}/cmdline").read_text()
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and str(scratch) in cmdline:
            found["watchdog" if "_process.py" in cmdline else "program"] = int(pid)
    return found

deadline = time.monotonic() + 30
while len(found := children()) < 2 and time.monotonic() < deadline:  # no watchdog: reported at the deadline
    time.sleep(0.01)
print(json.dumps({{"pid": found["program"], "folder": str(scratch), "marker": str(scratch)}}), flush=True)
sys.stdin.read()
"""

# A scenario program in an env without tracescore (as LiteLLM's): an interpreter without site-packages (-I -S,
# exec'd in place: the same process, its pipes kept) starts a stand-in server, which serves the program's
# scratch folder (the marker), through server_process; it reports and waits.
_PROGRAM = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, {scenarios!r})
assert "tracescore" not in sys.modules
from _guarded import free_port, server_process

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
    """record.py ends a scenario program that overruns its time, and the program's guard ends it when
    record.py is killed: its servers ran on for good, their ports taken, its scratch folder left."""
    program = _PROGRAM.format(scenarios=str(SCENARIOS))
    ends_with_its_owner(_OWNER.format(program=program), "the recording's server")


def test_a_scenario_program_ends_with_the_recording_however_the_recording_is_killed() -> None:
    """record.py killed (SIGKILL, a closed terminal) left the scenario program it ran recording on, and its
    scratch folder in the fixtures folder."""
    ends_with_its_owner(_RECORDER.format(fixtures=str(FIXTURES)), "the scenario program")
