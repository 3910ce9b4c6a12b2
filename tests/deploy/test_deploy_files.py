"""The deployment files, validated as far as this machine allows: compose against the compose-spec JSON
schema, Kubernetes manifests with kubeconform (Kubernetes schemas and KEDA's CRD schema), Prometheus and
Alertmanager configs with promtool and amtool, alert configs with tracescore's own loader, the Dockerfile's
sources and entry point. (No container runtime here: images are neither built nor run.)"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from deploy_stack import REPO

from tracescore.alert import AlertConfig, default_rule, load_alert_config
from tracescore.cli import main as tracescore_command
from tracescore.consume import ConsumerSettings
from tracescore.conversations import ConversationsConfig, load_conversations_config

DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"
K8S_VERSION = "v1.34.0"


@pytest.fixture(scope="session")
def tools() -> tuple[Path, Path, Path]:
    """kubeconform, compose-spec.json and KEDA's CRD directory, fetched through the Go module proxy."""
    done = subprocess.run(
        ["bash", str(DEPLOY / "tools.sh")], capture_output=True, text=True, timeout=45 * 60, check=False
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or len(lines) != 3:
        pytest.fail(f"deploy/tools.sh failed:\n{done.stderr[-3000:]}", pytrace=False)
    kubeconform, compose_schema, keda_crds = (Path(line) for line in lines)
    return kubeconform, compose_schema, keda_crds


def test_compose_file_follows_the_compose_spec(tools: tuple[Path, Path, Path]) -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    schema = json.loads(tools[1].read_text())
    jsonschema.validate(compose, schema)
    services = {"kafka", "otelcol-ingest", "otelcol-metrics", "tracescore-consume", "tracescore-alert"}
    assert services | {"tracescore-conversations"} <= set(compose["services"])
    assert {"prometheus", "alertmanager", "grafana", "kafka-exporter"} <= set(compose["services"])


def test_compose_mounts_and_builds_files_that_exist() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name} mounts {source}, which does not exist"
        if "build" in service:
            assert (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]).is_file()
    # The Collector configs the compose file runs are the repository's, which the Collector validates.
    commands = " ".join(" ".join(s.get("command", [])) for s in compose["services"].values())
    for config in re.findall(r"/etc/otelcol/([\w-]+\.yaml)", commands):
        assert (REPO / "collectors" / config).is_file()


def test_dockerfile_copies_what_exists_and_runs_the_console_script() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    for sources in re.findall(r"^COPY (.+) \S+$", text, flags=re.MULTILINE):
        for source in sources.split():
            assert (REPO / source).exists(), source
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert 'ENTRYPOINT ["tracescore"]' in text and "tracescore" in scripts
    assert re.search(r"^USER \d+", text, flags=re.MULTILINE), "the image must not run as root"


def test_the_image_installs_the_extra_its_command_needs() -> None:
    """The plain install is the SDK alone: an image built with `pip install .` had a `tracescore` that only
    said to install the consumer extra, and every service it was to run exited 1."""
    text = (DEPLOY / "Dockerfile").read_text()
    installs = re.findall(r"pip install (?:-\S+ )*['\"]?\.(?:\[([\w,-]+)\])?['\"]?(?=\s)", text)
    assert len(installs) == 1, f"one `pip install .[...]` of the checkout expected: {installs}"
    extras = set(installs[0].split(",")) - {""}
    optional = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    # The extra that brings the command line (click), as the command's own message names it.
    needed = {name for name, deps in optional.items() if any(re.match(r"click\b", d) for d in deps)}
    assert needed and extras & needed, f"the image installs {sorted(extras)}; the command needs {needed}"


def test_prometheus_config_and_rules_pass_promtool() -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: make promtool"
    done = subprocess.run(
        [promtool, "check", "config", str(DEPLOY / "prometheus" / "prometheus.yml")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_alertmanager_config_passes_amtool() -> None:
    amtool = shutil.which("amtool")
    assert amtool, "amtool is not installed: make alertmanager (Debian package prometheus-alertmanager)"
    done = subprocess.run(
        [amtool, "check-config", str(DEPLOY / "alertmanager" / "alertmanager.yml")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_shipped_alert_configs_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_alert_config(DEPLOY / "alert" / "alert.yaml")
    assert [s.type for s in config.sinks] == ["log", "webhook", "alertmanager"]
    (configmap,) = [d for d in _k8s_documents() if d["kind"] == "ConfigMap" and "alert.yaml" in d["data"]]
    path = tmp_path / "alert.yaml"
    path.write_text(configmap["data"]["alert.yaml"])
    assert load_alert_config(path).health_file == Path("/tmp/tracescore-alert.alive")


def test_the_kubernetes_alert_config_runs_the_default_rule(tmp_path: Path) -> None:
    """The alert ConfigMap's one rule is the rule `tracescore alert` runs without a config: as shipped before
    it was the thresholds alone on every estimate, which page all day on a healthy route of long answers
    scored by the offline judge alone (no LLM judge: the manifests' default)."""
    (configmap,) = [d for d in _k8s_documents() if d["kind"] == "ConfigMap" and "alert.yaml" in d["data"]]
    path = tmp_path / "alert.yaml"
    path.write_text(configmap["data"]["alert.yaml"])
    assert load_alert_config(path).rules == [default_rule()]


def test_shipped_conversations_configs_load(tmp_path: Path) -> None:
    config = load_conversations_config(DEPLOY / "conversations" / "conversations.yaml")
    assert (config.bootstrap_servers, config.quiet_seconds) == ("kafka:9092", 900.0)
    (configmap,) = [
        d for d in _k8s_documents() if d["kind"] == "ConfigMap" and "conversations.yaml" in d["data"]
    ]
    path = tmp_path / "conversations.yaml"
    path.write_text(configmap["data"]["conversations.yaml"])
    assert load_conversations_config(path).health_file == Path("/tmp/tracescore-conversations.alive")


_LOADERS = {"alert": load_alert_config, "conversations": load_conversations_config}
_PROBES = ("livenessProbe", "readinessProbe")


def test_every_probe_checks_the_health_file_its_service_touches(tmp_path: Path) -> None:
    """A probe on another file than the config's `health_file` never sees it touched: the pod would be
    restarted for good (Kubernetes) or shown unhealthy (compose) however well the service runs."""
    checked = []
    for document in _k8s_documents():
        if document["kind"] != "Deployment":
            continue
        spec = document["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        probes = [container[p]["exec"]["command"] for p in _PROBES if p in container]
        if not probes:
            continue
        health_file = _mounted_config(spec, tmp_path).health_file
        checked += [(document["metadata"]["name"], " ".join(probe), health_file) for probe in probes]
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        if "healthcheck" in service and str(service.get("image", "")).startswith("tracescore:"):
            (mounted,) = [v.split(":")[0] for v in service["volumes"] if v.startswith("./")]
            health_file = _LOADERS[service["command"][0]](DEPLOY / mounted).health_file
            checked.append((f"compose {name}", " ".join(service["healthcheck"]["test"]), health_file))
    assert len(checked) == 6, checked  # each service: two probes on Kubernetes, a healthcheck in compose
    for where, probe, health_file in checked:
        assert health_file is not None and re.findall(r"/\S+\.alive", probe) == [str(health_file)], where


def test_the_shipped_alert_config_shows_every_setting_and_marks_what_is_not_its_default() -> None:
    """deploy/alert/alert.yaml is the reference users copy ("the defaults unless marked"): a setting added to
    `tracescore alert` or a default changed in the code shows here."""
    path = DEPLOY / "alert" / "alert.yaml"
    text = path.read_text()
    shown, config = yaml.safe_load(text), load_alert_config(path)
    # The group's own topics are shown commented out: set, they would stay the same under another --group-id.
    group_topics = {"routes_topic", "state_topic", "legacy_state_topic"}
    assert not group_topics & set(shown), "a group's own topics set in the file every group copies"
    commented = {name for name in group_topics if f"\n# {name}: {getattr(config, name)} " in text}
    assert set(AlertConfig.model_fields) - set(shown) - commented == set(), "settings the file does not show"
    for name, field in AlertConfig.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if name in ("rules", "sinks"):  # examples, with the default ones among them
            assert all(item in getattr(config, name) for item in default), f"{name}: the default is not shown"
            continue
        line = next(line for line in text.splitlines() if line.removeprefix("# ").startswith(f"{name}:"))
        assert (getattr(config, name) == default) != ("not a default" in line), line


# What a settings class reads from the environment besides its own fields: every process's Kafka security.
_EVERY_PROCESS = re.compile(r"TRACESCORE_KAFKA__\w+")
_SETTINGS = {"consume": ConsumerSettings, "alert": AlertConfig, "conversations": ConversationsConfig}


def test_every_tracescore_container_is_given_real_flags_and_settings() -> None:
    """The flags and TRACESCORE_* variables compose.yaml and the Kubernetes manifests give each command are
    ones it reads: a renamed setting or flag fails here, not silently in a deployment (an unknown variable is
    ignored by the service)."""
    config = load_alert_config(DEPLOY / "alert" / "alert.yaml")
    secrets = {sink.secret_env for sink in config.sinks if getattr(sink, "secret_env", None)}
    containers = _tracescore_containers()
    assert {args[0] for _, args, _ in containers} == set(_SETTINGS)
    for where, args, variables in containers:
        command = tracescore_command.commands[args[0]]
        command.make_context(args[0], list(args[1:]))  # parsed, not run: an unknown flag raises
        settings = _SETTINGS[args[0]]
        prefix = str(settings.model_config.get("env_prefix", ""))
        known = {f"{prefix}{name}".upper() for name in settings.model_fields} | secrets
        if prefix != "TRACESCORE_":  # the services fall back to consume's name for the brokers
            known.add("TRACESCORE_BOOTSTRAP_SERVERS")
        unknown = [v for v in variables if v.startswith("TRACESCORE_") and v not in known]
        assert not [v for v in unknown if not _EVERY_PROCESS.fullmatch(v)], f"{where}: {unknown}"


def _tracescore_containers() -> list[tuple[str, list[str], list[str]]]:
    """(where, the tracescore command's arguments, the environment variables it is given) of every
    tracescore service in compose.yaml and container in the Kubernetes manifests."""
    found = []
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        if str(service.get("image", "")).startswith("tracescore:"):
            found.append((f"compose {name}", service["command"], list(service.get("environment", {}))))
    for document in _k8s_documents():
        if document["kind"] != "Deployment":
            continue
        for container in document["spec"]["template"]["spec"]["containers"]:
            if container["image"].startswith("tracescore:"):
                where = f"{document['metadata']['name']} {container['name']}"
                found.append((where, container["args"], [e["name"] for e in container.get("env", [])]))
    return found


def test_kubernetes_manifests_pass_kubeconform_with_the_keda_schema(
    tools: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    kubeconform, _, keda_crds = tools
    schemas = tmp_path / "schemas"
    kinds = {(d["apiVersion"], d["kind"]) for d in _k8s_documents()}
    _standalone_kubernetes_schemas(schemas / K8S_VERSION, kinds)
    _crd_schemas(keda_crds / "keda.sh_scaledobjects.yaml", schemas / "crds")
    done = subprocess.run(
        [
            str(kubeconform),
            *("-strict", "-summary", "-output", "text", "-kubernetes-version", K8S_VERSION[1:]),
            *("-schema-location", str(schemas / K8S_VERSION) + "/{{ .ResourceKind }}{{ .KindSuffix }}.json"),
            *(
                "-schema-location",
                str(schemas / "crds") + "/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json",
            ),
            str(K8S),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Invalid: 0, Errors: 0, Skipped: 0" in done.stdout
    assert ("keda.sh/v1alpha1", "ScaledObject") in kinds


def test_kubeconform_rejects_a_broken_scaled_object(tools: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """The KEDA schema really is applied: a misspelt field fails."""
    kubeconform, _, keda_crds = tools
    _crd_schemas(keda_crds / "keda.sh_scaledobjects.yaml", tmp_path / "crds")
    broken = tmp_path / "broken.yaml"
    text = (K8S / "keda-scaledobject.yaml").read_text().replace("maxReplicaCount:", "maxReplicas:")
    broken.write_text(text)
    done = subprocess.run(
        [
            str(kubeconform),
            "-strict",
            *(
                "-schema-location",
                str(tmp_path / "crds") + "/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json",
            ),
            str(broken),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "maxReplicas" in done.stdout, done.stdout + done.stderr


def test_the_scaled_object_measures_the_lag_of_what_the_consumers_read() -> None:
    """KEDA's scaler reads the brokers, group and topic from the consume container's own variables (KEDA's
    `<key>FromEnv`), so a bootstrap address or group changed in one place cannot leave the autoscaler
    measuring another group's lag (or an unreachable cluster's)."""
    (scaled,) = [d for d in _k8s_documents() if d["kind"] == "ScaledObject"]
    target = scaled["spec"]["scaleTargetRef"]["name"]
    (deployment,) = [
        d for d in _k8s_documents() if d["kind"] == "Deployment" and d["metadata"]["name"] == target
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    given = {e["name"] for e in container["env"]}
    (trigger,) = scaled["spec"]["triggers"]
    for key in ("bootstrapServers", "consumerGroup", "topic"):
        assert key not in trigger["metadata"], (
            f"{key} written in the ScaledObject as well as for the consumers"
        )
        assert trigger["metadata"][f"{key}FromEnv"] in given, key
    flags = " ".join(container["args"])
    assert "--topic" not in flags and "--group-id" not in flags, (
        "a flag would win over the variable KEDA reads"
    )
    # A group without committed offsets: KEDA counts its lag from where the consumers will start reading.
    values = {e["name"]: e.get("value") for e in container["env"]}
    reset = values.get("TRACESCORE_AUTO_OFFSET_RESET")
    reset = reset or ConsumerSettings.model_fields["auto_offset_reset"].default
    assert "--auto-offset-reset" not in flags, "a flag would win over the variable read here"
    assert trigger["metadata"]["offsetResetPolicy"] == reset, "KEDA counts lag from another offset"
    # Kubernetes: a Deployment an autoscaler scales leaves out spec.replicas, or each apply resets the count.
    assert "replicas" not in deployment["spec"], "kubectl apply would scale the consumers back to it"


def test_deployments_reference_secrets_and_request_resources() -> None:
    deployments = {d["metadata"]["name"]: d for d in _k8s_documents() if d["kind"] == "Deployment"}
    assert set(deployments) == {"tracescore-consume", "tracescore-alert", "tracescore-conversations"}
    for name, deployment in deployments.items():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["resources"]["requests"], name
        refs = [
            e["valueFrom"]["secretKeyRef"]
            for e in container["env"]
            if "secretKeyRef" in e.get("valueFrom", {})
        ]
        assert refs, f"{name} takes its secrets from a Secret"
    for service in ("tracescore-alert", "tracescore-conversations"):
        container = deployments[service]["spec"]["template"]["spec"]["containers"][0]
        assert "livenessProbe" in container and "readinessProbe" in container, service
    assert not any(d["kind"] == "Secret" for d in _k8s_documents()), "never ship a Secret's values"


def _k8s_documents() -> list[dict[str, Any]]:
    return [d for path in sorted(K8S.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text()) if d]


def _standalone_kubernetes_schemas(target: Path, kinds: set[tuple[str, str]]) -> None:
    """kubernetes-validate's strict schemas (PyPI) made standalone: definitions inlined as $defs."""
    source = (
        Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"{K8S_VERSION}-local-strict"
    )
    definitions = json.loads((source / "_definitions.json").read_text())["$defs"]
    target.mkdir(parents=True, exist_ok=True)
    for api_version, kind in kinds:
        group, _, version = api_version.rpartition("/")
        suffix = f"-{group.split('.')[0]}-{version}" if group else f"-{version}"
        name = f"{kind.lower()}{suffix}.json"
        if not (source / name).is_file():
            continue  # a CRD kind: its schema comes from the CRD
        schema = json.loads((source / name).read_text())
        schema["$defs"] = definitions
        text = json.dumps(schema).replace('"/api/_definitions.json#/$defs/', '"#/$defs/')
        (target / name).write_text(text)


def _crd_schemas(crd_path: Path, target: Path) -> None:
    """A CRD's openAPIV3Schema per served version, as kubeconform looks it up: {group}/{kind}_{version}.json,
    strict (no unknown fields), as kubeconform's own openapi2jsonschema does."""
    crd = yaml.safe_load(crd_path.read_text())
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"].lower()
    (target / group).mkdir(parents=True, exist_ok=True)
    for version in crd["spec"]["versions"]:
        schema = _strict(version["schema"]["openAPIV3Schema"])
        (target / group / f"{kind}_{version['name']}.json").write_text(json.dumps(schema))


def _strict(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _strict(v) for k, v in node.items()}
        if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


def test_every_service_stops_within_the_grace_period_its_deployment_gives() -> None:
    """SIGTERM's whole stop (its `stop_timeout_s`, counted from the signal) ends well inside the
    terminationGracePeriodSeconds of its Deployment: about 10 s are left for the process to exit (and for a
    broker call under way at the end of the budget). A stop that overran it would be killed without a word."""
    budgets = {
        "tracescore-consume": ConsumerSettings.model_fields["stop_timeout_s"].default,
        "tracescore-alert": AlertConfig.model_fields["stop_timeout_s"].default,
        "tracescore-conversations": ConversationsConfig.model_fields["stop_timeout_s"].default,
    }
    deployments = {d["metadata"]["name"]: d for d in _k8s_documents() if d["kind"] == "Deployment"}
    for name, budget in budgets.items():
        grace = deployments[name]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert budget + 10 <= grace, f"{name}: a stop of {budget:g}s in a grace period of {grace}s"


# What a `tracescore consume` member took from its start to its partitions in the walk of five members on one
# loaded two-core host: 3-12 s (notes newuser25_walk).
_CONSUME_JOIN_S = 12


def test_a_consume_rollout_stops_an_old_member_only_once_its_successor_could_join() -> None:
    """The consumer has no readiness probe, so Kubernetes counts its pod ready once its process starts: with
    no minReadySeconds a `kubectl rollout restart` stopped each old member a second after starting its
    successor, every member within seconds, while the new ones were still starting (the walk measured the
    old two gone 1 s after their successors started). One member at a time, kept until its successor has had
    the time to join."""
    deployments = {d["metadata"]["name"]: d for d in _k8s_documents() if d["kind"] == "Deployment"}
    consume = deployments["tracescore-consume"]
    (container,) = consume["spec"]["template"]["spec"]["containers"]
    spec = consume["spec"]
    if "readinessProbe" not in container:
        assert spec.get("minReadySeconds", 0) >= 2 * _CONSUME_JOIN_S, spec.get("minReadySeconds")
    rolling = spec["strategy"]["rollingUpdate"]
    assert (rolling["maxSurge"], rolling["maxUnavailable"]) == (1, 0), rolling


def test_a_drain_evicts_one_replica_of_each_service_at_a_time() -> None:
    """A node drained (an upgrade, the cluster autoscaler) evicts whatever runs there: without a
    PodDisruptionBudget both alert replicas (or both conversations replicas, or several consumers) may stop
    together and nobody holds their partitions until they start elsewhere."""
    budgets = [d for d in _k8s_documents() if d["kind"] == "PodDisruptionBudget"]
    for deployment in (d for d in _k8s_documents() if d["kind"] == "Deployment"):
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        covering = [b for b in budgets if b["spec"]["selector"]["matchLabels"].items() <= labels.items()]
        name = deployment["metadata"]["name"]
        assert [b["spec"].get("maxUnavailable") for b in covering] == [1], name


def test_every_compose_service_stops_within_its_stop_grace_period() -> None:
    """`docker compose stop` (and `down`, and a restart) kills a container 10 s after SIGTERM unless the
    service sets `stop_grace_period`: the compose stack gave none, so a consumer with answers being judged
    was killed before its commit and the next member scored them again."""
    budgets = {
        "consume": ConsumerSettings.model_fields["stop_timeout_s"].default,
        "alert": AlertConfig.model_fields["stop_timeout_s"].default,
        "conversations": ConversationsConfig.model_fields["stop_timeout_s"].default,
    }
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    checked = []
    for name, service in compose["services"].items():
        if not str(service.get("image", "")).startswith("tracescore:"):
            continue
        budget = budgets[service["command"][0]]
        grace = _seconds(service.get("stop_grace_period", "10s"))  # compose's default
        assert budget + 10 <= grace, f"{name}: a stop of {budget:g}s in a grace period of {grace:g}s"
        checked.append(name)
    assert len(checked) == 3, checked


def _seconds(duration: str) -> float:
    """A compose duration (`1m30s`, `45s`) in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(float(n) * units[u] for n, u in parts)


def test_the_deploy_page_creates_the_topics_every_replica_reads_with_enough_partitions() -> None:
    """The SDK and `tracescore consume` create a topic they write with the broker's default partition count
    (1 on a stock Kafka): KEDA never scales the consumers past the spans topic's partitions, and a replica
    beyond a topic's partitions sits idle. The page said "up to the spans topic's partition count" and gave
    no way to get one: the manifests' scaling was one consumer."""
    commands = re.findall(
        r"kafka-topics\.sh --bootstrap-server (\S+) --create --topic (\S+) --partitions (\d+)",
        (REPO / "docs" / "deploy.md").read_text(),
    )
    created = {topic: int(partitions) for _, topic, partitions in commands}
    (config,) = [
        d for d in _k8s_documents() if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "tracescore"
    ]
    assert {server for server, _, _ in commands} == {config["data"]["bootstrap-servers"]}
    deployments = {d["metadata"]["name"]: d for d in _k8s_documents() if d["kind"] == "Deployment"}
    (consume,) = deployments["tracescore-consume"]["spec"]["template"]["spec"]["containers"]
    spans = next(e["value"] for e in consume["env"] if e["name"] == "TRACESCORE_TOPIC")
    (scaled,) = [d for d in _k8s_documents() if d["kind"] == "ScaledObject"]
    assert created.get(spans, 0) >= scaled["spec"]["maxReplicaCount"], created
    # What alert and conversations read in their first group: written (and so created) by consume.
    services = max(
        deployments[f"tracescore-{name}"]["spec"]["replicas"] for name in ("alert", "conversations")
    )
    for field in ("evaluations_topic", "conversation_evidence_topic"):
        topic = ConsumerSettings.model_fields[field].default
        assert created.get(topic, 0) >= services, f"{topic}: {created}"


def test_the_services_replicas_fit_their_keyed_topics_partitions(tmp_path: Path) -> None:
    """An alert or conversations replica beyond its keyed topic's partitions (routes_partitions,
    turns_partitions, as its ConfigMap loads) holds no route or conversation: it would only take part in
    every rebalance."""
    partitions = {"alert": "routes_partitions", "conversations": "turns_partitions"}
    for document in _k8s_documents():
        if document["kind"] != "Deployment" or "replicas" not in document["spec"]:
            continue
        spec = document["spec"]["template"]["spec"]
        keyed = partitions[spec["containers"][0]["args"][0]]
        replicas, name = document["spec"]["replicas"], document["metadata"]["name"]
        assert replicas <= getattr(_mounted_config(spec, tmp_path), keyed), name


def _mounted_config(spec: dict[str, Any], tmp_path: Path) -> Any:
    """The config a pod spec's one tracescore container loads from its ConfigMap, by the service's own
    loader."""
    (container,) = spec["containers"]
    (volume,) = [v for v in spec["volumes"] if "configMap" in v]
    (configmap,) = [
        d
        for d in _k8s_documents()
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == volume["configMap"]["name"]
    ]
    ((name, text),) = configmap["data"].items()
    (tmp_path / name).write_text(text)
    return _LOADERS[container["args"][0]](tmp_path / name)


# Measured (benchmarks/alert_memory.py): the most `tracescore alert` holds a route under the default rule,
# 135 KB by tracemalloc at 5,000 answers with 200 baseline pairs kept (98 KB at 10,000 offline answers), and
# an eighth more for the allocator (RSS / tracemalloc 1.0-1.13 at 20-300 routes); and its process before any
# route.
_ALERT_ROUTE_BYTES = 155_000
_ALERT_PROCESS_BYTES = 80 * 2**20


def test_the_alert_pods_memory_limit_holds_its_max_routes(tmp_path: Path) -> None:
    """The alert ConfigMap left `max_routes` at 10,000 under a 512Mi limit: ~0.6 MB a route, so past ~700
    routes an instance was killed for memory long before eviction bounded it (and restarted to restore them
    again)."""
    (deployment,) = [
        d
        for d in _k8s_documents()
        if d["kind"] == "Deployment" and d["metadata"]["name"] == "tracescore-alert"
    ]
    spec = deployment["spec"]["template"]["spec"]
    config = _mounted_config(spec, tmp_path)
    limit = _bytes(spec["containers"][0]["resources"]["limits"]["memory"])
    held = config.max_routes * _ALERT_ROUTE_BYTES + _ALERT_PROCESS_BYTES
    assert held <= limit, (
        f"max_routes {config.max_routes}: ~{held / 2**20:.0f} MiB in a limit of {limit / 2**20:.0f}"
    )


def _bytes(quantity: str) -> int:
    """A Kubernetes memory quantity (`512Mi`, `1Gi`) in bytes."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    number, unit = re.fullmatch(r"(\d+)(Ki|Mi|Gi)", quantity).groups()  # type: ignore[union-attr]
    return int(number) * units[unit]
