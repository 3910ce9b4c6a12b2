"""The Apache Kafka broker's jars, fetched from Maven Central through the machine's Maven into a cache outside
the repo (once per version; parallel test sessions share it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tracescore.testing._process import locked

__all__ = ["CACHE_ROOT", "KAFKA_VERSION", "LOG4J_VERSION", "KafkaUnavailable", "fetch_kafka_jars"]

KAFKA_VERSION = os.environ.get("TRACESCORE_KAFKA_VERSION", "4.1.1")
LOG4J_VERSION = "2.24.3"
CACHE_ROOT = Path(os.environ.get("TRACESCORE_CACHE_DIR", Path.home() / ".cache" / "tracescore"))

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>tracescore</groupId><artifactId>kafka-runtime</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{kafka}</version></dependency>
    <!-- Kafka logs through slf4j 1.x; this binding sends it to log4j2 so server.log is written. -->
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j}</version></dependency>
  </dependencies>
</project>
"""


class KafkaUnavailable(RuntimeError):
    """The broker could not be fetched or started; the message carries the command and its output."""


def fetch_kafka_jars(version: str = KAFKA_VERSION, cache_root: Path = CACHE_ROOT) -> Path:
    """The directory holding the broker's runtime classpath, resolved with Maven on first use."""
    home = cache_root / f"kafka-{version}"
    libs = home / "libs"
    home.mkdir(parents=True, exist_ok=True)
    # Parallel test sessions share the cache: one fetches, the others wait and then reuse it.
    with locked(cache_root / f"kafka-{version}.lock"):
        if (home / ".complete").exists():
            return libs
        (home / "pom.xml").write_text(_POM.format(kafka=version, log4j=LOG4J_VERSION))
        mvn = shutil.which("mvn")
        if mvn is None:
            raise KafkaUnavailable(
                "Maven ('mvn') is not on PATH; it fetches the Kafka jars from Maven Central"
            )
        command = [
            mvn, "-q", "-B", "-f", str(home / "pom.xml"), "dependency:copy-dependencies",
            f"-DoutputDirectory={libs}", "-DincludeScope=runtime",
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            output = f"{done.stdout}{done.stderr}"
            raise KafkaUnavailable(f"{' '.join(command)} failed ({done.returncode}):\n{output}")
        (home / ".complete").write_text(version)
    return libs
