"""The Collectors tests start end with the process that started them, however that process ends: the one a
`CollectorProcess` runs, and the one a Node app's live run and recording send through
(`collector_to_kafka`)."""

from __future__ import annotations

from pathlib import Path

from _helpers import ends_with_its_owner

from tracescore.testing import free_port
from tracescore.testing.kafka_broker import KafkaBroker

# A Collector that needs nothing else: OTLP/HTTP in, the debug exporter out, on free loopback ports.
_CONFIG = """
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp_port}
exporters:
  debug: {{}}
service:
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [debug]
  telemetry:
    metrics:
      level: none
"""

# Starts a CollectorProcess on `config` (its path: the marker; it has no folder of its own) and waits.
_OWNER = """
import json, sys
from pathlib import Path
sys.path.insert(0, "tests/collectors")
from collector_helpers import CollectorProcess

config = Path({config!r})
collector = CollectorProcess(Path({otelcol!r}), [config], {{}}, config.with_suffix(".log")).start()
print(json.dumps({{"pid": collector.process.pid, "marker": str(config)}}), flush=True)
sys.stdin.read()
"""

# Enters collector_to_kafka (its process is not exposed: found as this process's child running `otelcol`) and
# waits; the work folder given is the test's.
_NODE_OWNER = """
import json, os, sys
from pathlib import Path
sys.path[:0] = ["tests/extract/fixtures", "tests/extract/fixtures/scenarios"]
from _node import collector_to_kafka, INGEST_CONFIG

session = collector_to_kafka(Path({otelcol!r}), {bootstrap!r}, Path({workdir!r}))  # held: no exit
session.__enter__()

def is_mine(pid):
    try:  # a process of another test may end between the listing and the read
        parent = int(Path(f"/proc/{{pid}}/stat").read_text().rsplit(")", 1)[1].split()[1])
        return parent == os.getpid() and {otelcol!r} in Path(f"/proc/{{pid}}/cmdline").read_text()
    except (OSError, IndexError, ValueError):
        return False

mine = [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and is_mine(pid)]
print(json.dumps({{"pid": mine[0], "marker": str(INGEST_CONFIG)}}), flush=True)
sys.stdin.read()
"""


def test_a_collector_process_ends_with_the_process_that_started_it(otelcol: Path, tmp_path: Path) -> None:
    """A test killed on a timeout (SIGKILL: no stop(), no atexit) left its Collector running for good,
    orphaned, its ports taken."""
    config = tmp_path / "otelcol.yaml"
    config.write_text(_CONFIG.format(otlp_port=free_port()))
    ends_with_its_owner(_OWNER.format(config=str(config), otelcol=str(otelcol)), "the Collector")


def test_a_node_apps_collector_ends_with_the_process_that_started_it(
    otelcol: Path, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    """The same for the Collector a Node app's live run (tests/collectors) or recording sends through."""
    owner = _NODE_OWNER.format(
        otelcol=str(otelcol), bootstrap=kafka_broker.bootstrap_servers, workdir=str(tmp_path)
    )
    ends_with_its_owner(owner, "the Collector")
