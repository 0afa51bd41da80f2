#!/usr/bin/env python3
"""Checks deploy/ and the Dockerfile for what a cluster, a compose engine or systemd would
reject, and for what would break tomod in them:

  check_deploy.py REPO_ROOT TOMOD_BINARY

- every YAML file parses; every Kubernetes object has apiVersion, kind and a DNS-1123
  metadata.name, and the fields its kind requires;
- the Deployment: selector labels on the pod template, named container ports valid,
  volume mounts backed by volumes, volumes by the ConfigMap, Secret and claim of the
  manifests, an nvidia.com/gpu limit, non-root and read-only root file system, a
  termination grace above tomod's drain timeout, and each probe (grpc: its port; exec
  `tomo health`: its --server port) on the gRPC container port that --listen names;
- the Service: its selector matches the pods, each targetPort is a container port;
- Kustomize: resources exist, the generated Secret holds every file the flags name;
- compose: the GPU reservation, the spool volume on the image's spool, secrets defined,
  the stop grace above the drain timeout, Prometheus scraping the metrics port;
- systemd: TimeoutStopSec above the drain timeout, every ${VAR} of ExecStart set in the
  environment file, `systemd-analyze verify` clean where systemd-analyze is installed;
- the Dockerfile: a numeric non-root USER, a HEALTHCHECK, the spool VOLUME;
- every tomod flag named anywhere above exists in `tomod --helpfull`.
Then the same checks on deliberately broken copies must each report the break (so the
checks can fail). Prints every problem; exits 1 when there is one.
"""
import copy
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import yaml

DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
PORT_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9_]*)(?==|\s|$|\"|')")
SPOOL = "/var/lib/tomoserve/spool"
# The flags that name files which the secrets hold.
SECRET_FLAGS = ("tls_cert_file", "tls_key_file", "tls_client_ca_file", "tokens_file",
                "metrics_token_file")
# What each kind needs beyond apiVersion, kind and metadata.name (dotted paths).
REQUIRED = {
    "Deployment": ["spec.selector.matchLabels", "spec.template.metadata.labels",
                   "spec.template.spec.containers"],
    "Service": ["spec.selector", "spec.ports"],
    "PersistentVolumeClaim": ["spec.accessModes", "spec.resources.requests.storage"],
    "ConfigMap": ["data"],
    "Namespace": [],
    "Secret": [],
}


def dig(obj, path):
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def seconds(text):
    """absl/Go durations as tomod and systemd write them: 30s, 1m30s, 2m, 90 -> seconds."""
    text = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    total, matched = 0.0, ""
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s|min)", text):
        total += float(number) * {"h": 3600, "m": 60, "min": 60, "s": 1, "ms": 0.001}[unit]
        matched += number + unit
    if matched != text:
        raise ValueError(f"duration {text!r} does not parse")
    return total


# Flags Abseil's command-line parser itself takes, which tomod's --help (its own flags only)
# does not list.
PARSER_FLAGS = {"flagfile": "", "fromenv": "", "tryfromenv": "", "undefok": ""}


def tomod_flags(binary):
    """{flag: default text} from tomod --helpfull, plus the parser's own flags."""
    out = subprocess.run([binary, "--helpfull"], capture_output=True, text=True, timeout=30)
    text = out.stdout + out.stderr
    flags = {}
    starts = list(re.finditer(r"^\s+--(\w+) \(", text, re.M))
    for i, start in enumerate(starts):
        entry = text[start.start():starts[i + 1].start() if i + 1 < len(starts) else None]
        default = re.search(r"default: (.*?);\s*$", entry, re.S)
        flags[start.group(1)] = default.group(1).strip('"') if default else ""
    if "listen" not in flags:
        raise RuntimeError(f"{binary} --helpfull lists no --listen:\n{text[:500]}")
    return {**PARSER_FLAGS, **flags}


def flag_values(args):
    """{flag: value} of --flag=value and --flag value words (the last one wins)."""
    values = {}
    words = list(args)
    for i, word in enumerate(words):
        match = re.fullmatch(r"--([a-z][a-z0-9_]*)(?:=(.*))?", word)
        if not match:
            continue
        value = match.group(2)
        if value is None and i + 1 < len(words) and not words[i + 1].startswith("--"):
            value = words[i + 1]
        values[match.group(1)] = value if value is not None else ""
    return values


def port_of(address):
    match = re.search(r":(\d+)$", address or "")
    return int(match.group(1)) if match else None


class Checker:
    def __init__(self, flags, tomod_binary):
        self.flags = flags
        self.tomod_binary = tomod_binary
        self.problems = []
        self.drain_default = seconds(flags.get("drain_timeout", "30s"))

    def problem(self, where, text):
        self.problems.append(f"{where}: {text}")

    def check_flags(self, where, words):
        for name in FLAG.findall(" ".join(words)):
            if name not in self.flags:
                self.problem(where, f"--{name} is not a tomod flag (tomod --helpfull)")

    def drain(self, values):
        return seconds(values["drain_timeout"]) if "drain_timeout" in values \
            else self.drain_default

    # ------------------------------------------------------------------ Kubernetes
    def check_kubernetes(self, files):
        """files: {relative path: [objects]} of deploy/kubernetes."""
        objects = [(path, o) for path, docs in files.items() for o in docs
                   if isinstance(o, dict) and "kind" in o and o.get("kind") != "Kustomization"]
        by_kind = {}
        for path, obj in objects:
            name = dig(obj, "metadata.name")
            where = f"{path} {obj.get('kind')}/{name}"
            if not obj.get("apiVersion"):
                self.problem(where, "no apiVersion")
            if not isinstance(name, str) or not DNS1123.match(name) or len(name) > 253:
                self.problem(where, f"metadata.name {name!r} is not a DNS-1123 name")
            for field in REQUIRED.get(obj["kind"], []):
                if dig(obj, field) in (None, [], {}):
                    self.problem(where, f"{field} is required")
            by_kind.setdefault(obj["kind"], {})[name] = obj
        kustomization = next((o for docs in files.values() for o in docs
                              if isinstance(o, dict) and o.get("kind") == "Kustomization"), None)
        secret_keys = {}
        config_keys = {n: set((c.get("data") or {}).keys())
                       for n, c in by_kind.get("ConfigMap", {}).items()}
        for name, secret in by_kind.get("Secret", {}).items():
            secret_keys[name] = set((secret.get("data") or {}).keys()) | \
                set((secret.get("stringData") or {}).keys())
        if kustomization:
            for resource in kustomization.get("resources", []):
                if resource not in files:
                    self.problem("kustomization.yaml", f"resource {resource} does not exist")
            for generator in kustomization.get("secretGenerator", []):
                keys = set()
                for entry in generator.get("files", []):
                    key, _, source = entry.partition("=")
                    keys.add(key if source else os.path.basename(key))
                secret_keys[generator["name"]] = keys
            if not dig(kustomization, "generatorOptions.disableNameSuffixHash") and \
                    kustomization.get("secretGenerator"):
                self.problem("kustomization.yaml",
                             "generated Secrets get a hash suffix: the Deployment's "
                             "secretName would not match (disableNameSuffixHash)")
        claims = set(by_kind.get("PersistentVolumeClaim", {}))
        deployments = by_kind.get("Deployment", {})
        if not deployments:
            self.problem("deploy/kubernetes", "no Deployment")
        pod_labels, container_ports = {}, {}
        for name, deployment in deployments.items():
            where = f"Deployment/{name}"
            spec = deployment.get("spec", {})
            template = spec.get("template", {})
            labels = dig(template, "metadata.labels") or {}
            pod_labels = labels
            for key, value in (dig(spec, "selector.matchLabels") or {}).items():
                if labels.get(key) != value:
                    self.problem(where, f"selector {key}={value} is not on the pod template")
            pod = template.get("spec", {})
            volumes = {v.get("name"): v for v in pod.get("volumes", [])}
            for volume_name, volume in volumes.items():
                if "persistentVolumeClaim" in volume and \
                        volume["persistentVolumeClaim"].get("claimName") not in claims:
                    self.problem(where, f"volume {volume_name}: no claim "
                                        f"{volume['persistentVolumeClaim'].get('claimName')}")
                if "configMap" in volume and volume["configMap"].get("name") not in config_keys:
                    self.problem(where, f"volume {volume_name}: no ConfigMap "
                                        f"{volume['configMap'].get('name')}")
                if "secret" in volume and volume["secret"].get("secretName") not in secret_keys:
                    self.problem(where, f"volume {volume_name}: no Secret "
                                        f"{volume['secret'].get('secretName')}")
                mode = dig(volume, "secret.defaultMode")
                if mode is not None and mode & 0o007:
                    self.problem(where, f"volume {volume_name}: defaultMode {oct(mode)} lets "
                                        "others read; tomod refuses such a tokens file")
            context = pod.get("securityContext", {})
            if not context.get("runAsNonRoot"):
                self.problem(where, "securityContext.runAsNonRoot is not true")
            if context.get("runAsUser", 1) == 0:
                self.problem(where, "runAsUser is 0")
            grace = pod.get("terminationGracePeriodSeconds", 30)
            if spec.get("strategy", {}).get("type") != "Recreate":
                self.problem(where, "strategy is not Recreate: two pods would share one "
                                    "ReadWriteOnce spool")
            containers = pod.get("containers", [])
            for container in containers:
                cwhere = f"{where} container {container.get('name')}"
                for field in ("name", "image"):
                    if not container.get(field):
                        self.problem(cwhere, f"{field} is required")
                ports = {}
                for port in container.get("ports", []):
                    number = port.get("containerPort")
                    if not isinstance(number, int) or not 0 < number < 65536:
                        self.problem(cwhere, f"containerPort {number!r} is not 1..65535")
                    pname = port.get("name")
                    if pname is not None and (len(pname) > 15 or not PORT_NAME.match(pname)):
                        self.problem(cwhere, f"port name {pname!r}: at most 15 of [a-z0-9-]")
                    ports[pname] = number
                container_ports.update(ports)
                mounts = {m.get("mountPath"): m for m in container.get("volumeMounts", [])}
                for path, mount in mounts.items():
                    if mount.get("name") not in volumes:
                        self.problem(cwhere, f"volumeMount {path}: no volume {mount.get('name')}")
                if SPOOL not in mounts or "persistentVolumeClaim" not in \
                        volumes.get(mounts[SPOOL].get("name"), {}):
                    self.problem(cwhere, f"{SPOOL} is not on the PersistentVolumeClaim")
                # tomod's flags: the args and the flag files they name from a ConfigMap.
                words = list(container.get("args", [])) + list(container.get("command", []))
                for path in re.findall(r"--flagfile=(\S+)", " ".join(words)):
                    directory, key = os.path.split(path)
                    mount = mounts.get(directory)
                    volume = volumes.get(mount.get("name")) if mount else None
                    config = dig(volume or {}, "configMap.name")
                    if config is None or key not in config_keys.get(config, set()):
                        self.problem(cwhere, f"--flagfile={path}: no ConfigMap key {key} "
                                             f"mounted at {directory}")
                    else:
                        text = by_kind["ConfigMap"][config]["data"][key]
                        words += [w for line in text.splitlines()
                                  if not line.strip().startswith("#") for w in line.split()]
                self.check_flags(cwhere, words)
                values = flag_values(words)
                listen = port_of(values.get("listen", ""))
                if listen not in ports.values():
                    self.problem(cwhere, f"--listen port {listen} is not a containerPort")
                metrics = int(values.get("metrics_port", self.flags.get("metrics_port", 0)))
                if metrics and metrics not in ports.values():
                    self.problem(cwhere, f"--metrics_port {metrics} is not a containerPort")
                drain = self.drain(values)
                if not grace > drain:
                    self.problem(cwhere, f"terminationGracePeriodSeconds {grace} is not above "
                                         f"the drain timeout {drain:g} s")
                for key in SECRET_FLAGS:
                    path = values.get(key)
                    if not path:
                        continue
                    directory, name_in = os.path.split(path)
                    mount = mounts.get(directory)
                    volume = volumes.get(mount.get("name")) if mount else None
                    secret = dig(volume or {}, "secret.secretName")
                    if secret is None or name_in not in secret_keys.get(secret, set()):
                        self.problem(cwhere, f"--{key}={path}: no Secret key {name_in} "
                                             f"mounted at {directory}")
                if not dig(container, "resources.limits") or \
                        int(dig(container, "resources.limits").get("nvidia.com/gpu", 0)) < 1:
                    self.problem(cwhere, "no nvidia.com/gpu limit")
                requested = dig(container, "resources.requests") or {}
                if "nvidia.com/gpu" in requested and requested["nvidia.com/gpu"] != \
                        dig(container, "resources.limits")["nvidia.com/gpu"]:
                    self.problem(cwhere, "nvidia.com/gpu request differs from its limit")
                csc = container.get("securityContext", {})
                if not csc.get("readOnlyRootFilesystem"):
                    self.problem(cwhere, "readOnlyRootFilesystem is not true")
                if csc.get("allowPrivilegeEscalation", True):
                    self.problem(cwhere, "allowPrivilegeEscalation is not false")
                for probe_name in ("readinessProbe", "livenessProbe"):
                    probe = container.get(probe_name)
                    if not probe:
                        self.problem(cwhere, f"no {probe_name}")
                        continue
                    self.check_probe(f"{cwhere} {probe_name}", probe, ports, listen)
                if container.get("startupProbe"):
                    self.check_probe(f"{cwhere} startupProbe", container["startupProbe"],
                                     ports, listen)
        for name, service in by_kind.get("Service", {}).items():
            where = f"Service/{name}"
            for key, value in (dig(service, "spec.selector") or {}).items():
                if pod_labels.get(key) != value:
                    self.problem(where, f"selector {key}={value} matches no pod")
            for port in dig(service, "spec.ports") or []:
                target = port.get("targetPort", port.get("port"))
                if target not in container_ports and target not in container_ports.values():
                    self.problem(where, f"port {port.get('name')}: targetPort {target} is "
                                        "not a container port")

    def check_probe(self, where, probe, ports, listen):
        handlers = [h for h in ("exec", "grpc", "httpGet", "tcpSocket") if h in probe]
        if len(handlers) != 1:
            self.problem(where, f"needs exactly one handler, has {handlers}")
            return
        if "grpc" in probe:
            port = probe["grpc"].get("port")
        elif "exec" in probe:
            command = probe["exec"].get("command", [])
            if "health" not in command:
                self.problem(where, "exec probe does not run `tomo health`")
                return
            port = port_of(flag_values(command).get("server", ""))
        else:
            self.problem(where, f"{handlers[0]} is not the gRPC health check")
            return
        if port != listen or port not in ports.values():
            self.problem(where, f"checks port {port}, tomod serves gRPC on {listen}")
        if probe.get("timeoutSeconds", 1) < 2:
            self.problem(where, "timeoutSeconds below 2: a busy tomod would be restarted")

    # ------------------------------------------------------------------ compose
    def check_compose(self, compose, prometheus):
        where = "compose.yaml"
        services = compose.get("services") or {}
        tomod = services.get("tomod")
        if not tomod:
            self.problem(where, "no service tomod")
            return
        if not tomod.get("image") and not tomod.get("build"):
            self.problem(where, "tomod has neither image nor build")
        words = [str(w) for w in tomod.get("command", [])]
        self.check_flags(f"{where} tomod command", words)
        values = flag_values(words)
        devices = dig(tomod, "deploy.resources.reservations.devices") or []
        if not any("gpu" in (d.get("capabilities") or []) for d in devices):
            self.problem(where, "tomod reserves no GPU")
        volumes = [str(v) for v in tomod.get("volumes", [])]
        if not any(v.split(":")[1:2] == [SPOOL] for v in volumes):
            self.problem(where, f"no volume on {SPOOL}")
        for volume in volumes:
            source = volume.split(":")[0]
            if not source.startswith((".", "/")) and source not in (compose.get("volumes") or {}):
                self.problem(where, f"volume {source} is not declared")
        defined = compose.get("secrets") or {}
        targets = {}
        for secret in tomod.get("secrets", []):
            source = secret.get("source") if isinstance(secret, dict) else secret
            if source not in defined:
                self.problem(where, f"secret {source} is not defined")
            targets[secret.get("target") if isinstance(secret, dict) else
                    f"/run/secrets/{secret}"] = source
        for key in SECRET_FLAGS:
            if values.get(key) and values[key] not in targets:
                self.problem(where, f"--{key}={values[key]} is no secret's target")
        grace = seconds(tomod.get("stop_grace_period", "10s"))
        if not grace > self.drain(values):
            self.problem(where, f"stop_grace_period {grace:g} s is not above the drain "
                                f"timeout {self.drain(values):g} s")
        listen = port_of(values.get("listen", ""))
        published = [str(p).split(":")[-1] for p in tomod.get("ports", [])]
        if str(listen) not in published:
            self.problem(where, f"the --listen port {listen} is not published")
        metrics = int(values.get("metrics_port", self.flags.get("metrics_port", 0)))
        scraped = [t for job in prometheus.get("scrape_configs", [])
                   for c in job.get("static_configs", []) for t in c.get("targets", [])]
        if f"tomod:{metrics}" not in scraped:
            self.problem("prometheus.yml", f"does not scrape tomod:{metrics} (--metrics_port)")
        if values.get("metrics_host", self.flags.get("metrics_host", "127.0.0.1")) in \
                ("127.0.0.1", "localhost", "::1"):
            self.problem(where, "the metrics stay on tomod's loopback (--metrics_host): "
                                "Prometheus cannot reach them")
        prometheus_service = services.get("prometheus")
        if not prometheus_service:
            self.problem(where, "no prometheus service")
        elif values.get("metrics_token_file"):
            files = [dig(job, "authorization.credentials_file")
                     for job in prometheus.get("scrape_configs", [])]
            mounted = [s.get("target") for s in prometheus_service.get("secrets", [])
                       if isinstance(s, dict)]
            if not any(f in mounted for f in files if f):
                self.problem("prometheus.yml", "tomod wants a metrics token "
                                               "(--metrics_token_file); no scrape sends one "
                                               "from a mounted secret")

    # ------------------------------------------------------------------ systemd
    def check_systemd(self, unit_text, env_text, unit_path):
        where = "tomod.service"
        env = {}
        for line in env_text.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition("=")
                env[key] = value
        service = {}
        section = None
        joined = re.sub(r"\\\n", " ", unit_text)
        for line in joined.splitlines():
            line = line.strip()
            if line.startswith("["):
                section = line
            elif section == "[Service]" and "=" in line and not line.startswith("#"):
                key, _, value = line.partition("=")
                service.setdefault(key, value)
        start = service.get("ExecStart", "")
        for name in re.findall(r"\$\{?(\w+)\}?", start):
            if name not in env and name != "MAINPID":
                self.problem(where, f"ExecStart uses ${name}, which tomod.env does not set")
        expanded = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), start)
        words = shlex.split(expanded)
        self.check_flags(f"{where} ExecStart", words)
        values = flag_values(words)
        drain = self.drain(values)
        stop = seconds(service.get("TimeoutStopSec", "90s"))
        if not stop > drain:
            self.problem(where, f"TimeoutStopSec {stop:g} s is not above the drain timeout "
                                f"{drain:g} s")
        for key in ("NoNewPrivileges", "ProtectSystem", "EnvironmentFile", "User"):
            if key not in service:
                self.problem(where, f"no {key}=")
        if unit_path and shutil.which("systemd-analyze"):
            with tempfile.TemporaryDirectory() as scratch:
                # verify wants ExecStart's program to exist: the tomod under test.
                unit = os.path.join(scratch, "tomod.service")
                with open(unit, "w") as f:
                    f.write(unit_text.replace("/usr/local/bin/tomod", self.tomod_binary))
                out = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True,
                                     text=True, timeout=60)
                if out.returncode != 0 or out.stderr.strip():
                    self.problem(where, "systemd-analyze verify: " +
                                 (out.stderr or out.stdout).strip())

    # ------------------------------------------------------------------ Dockerfile
    def check_dockerfile(self, text):
        where = "Dockerfile"
        joined = re.sub(r"\\\n", " ", text)
        runtime = joined.split("AS runtime\n")[-1]
        users = re.findall(r"^USER\s+(\S+)", runtime, re.M)
        if not users or not users[-1].split(":")[0].isdigit() or users[-1].startswith("0"):
            self.problem(where, f"the runtime's USER {users[-1:]} is not a numeric non-root uid")
        if not re.search(r"^HEALTHCHECK\s.*CMD", runtime, re.M):
            self.problem(where, "no HEALTHCHECK")
        if SPOOL not in " ".join(re.findall(r"^VOLUME\s+(.*)$", runtime, re.M)):
            self.problem(where, f"no VOLUME {SPOOL}")
        for instruction in ("ENTRYPOINT", "CMD"):
            for line in re.findall(rf"^{instruction}\s+(\[.*\])", runtime, re.M):
                self.check_flags(f"{where} {instruction}", yaml.safe_load(line))


def load(root):
    """The deployment files as parsed data: {name: parsed or text}."""
    def read(rel):
        with open(os.path.join(root, rel)) as f:
            return f.read()
    kubernetes = {}
    directory = os.path.join(root, "deploy", "kubernetes")
    for name in sorted(os.listdir(directory)):
        if name.endswith((".yaml", ".yml")):
            kubernetes[name] = list(yaml.safe_load_all(read(f"deploy/kubernetes/{name}")))
    return {
        "kubernetes": kubernetes,
        "compose": yaml.safe_load(read("deploy/compose/compose.yaml")),
        "prometheus": yaml.safe_load(read("deploy/compose/prometheus.yml")),
        "unit": read("deploy/systemd/tomod.service"),
        "env": read("deploy/systemd/tomod.env"),
        "dockerfile": read("Dockerfile"),
    }


def check(data, flags, tomod_binary, verify_unit=True):
    checker = Checker(flags, tomod_binary)
    checker.check_kubernetes(data["kubernetes"])
    checker.check_compose(data["compose"], data["prometheus"])
    checker.check_systemd(data["unit"], data["env"], verify_unit)
    checker.check_dockerfile(data["dockerfile"])
    return checker.problems


def deployment(data):
    return data["kubernetes"]["deployment.yaml"][0]["spec"]["template"]["spec"]


def container(data):
    return deployment(data)["containers"][0]


def mutations():
    """(what, change, text the report must hold): broken copies the checks must catch."""
    def flags_text(data, old, new):
        config = data["kubernetes"]["configmap.yaml"][0]["data"]
        config["tomod.flags"] = config["tomod.flags"].replace(old, new)

    return [
        ("grace below the drain", lambda d: deployment(d).update(terminationGracePeriodSeconds=20),
         "terminationGracePeriodSeconds 20"),
        ("longer drain", lambda d: flags_text(d, "--drain_timeout=30s", "--drain_timeout=2m"),
         "drain timeout 120"),
        ("probe on the metrics port",
         lambda d: container(d)["readinessProbe"]["exec"].update(
             command=["tomo", "--server", "localhost:9473", "health"]),
         "checks port 9473"),
        ("unknown flag", lambda d: flags_text(d, "--result_ttl", "--result_ttl_hours"),
         "--result_ttl_hours is not a tomod flag"),
        ("service port", lambda d: d["kubernetes"]["service.yaml"][0]["spec"]["ports"][0]
         .update(targetPort="gprc"), "targetPort gprc"),
        ("no GPU", lambda d: container(d)["resources"]["limits"].pop("nvidia.com/gpu"),
         "no nvidia.com/gpu limit"),
        ("root", lambda d: deployment(d)["securityContext"].pop("runAsNonRoot"),
         "runAsNonRoot"),
        ("missing secret key", lambda d: d["kubernetes"]["kustomization.yaml"][0]
         ["secretGenerator"][0]["files"].remove("tokens=secrets/tokens"),
         "no Secret key tokens mounted"),
        ("bad name", lambda d: d["kubernetes"]["service.yaml"][0]["metadata"]
         .update(name="Tomod_Service"), "not a DNS-1123 name"),
        ("compose grace", lambda d: d["compose"]["services"]["tomod"]
         .update(stop_grace_period="10s"), "stop_grace_period 10 s"),
        ("compose scrape", lambda d: d["prometheus"]["scrape_configs"][0]["static_configs"][0]
         .update(targets=["tomod:9090"]), "does not scrape tomod:9473"),
        ("scrape without the token", lambda d: d["prometheus"]["scrape_configs"][0]
         .pop("authorization"), "no scrape sends one"),
        ("systemd stop", lambda d: d.update(unit=d["unit"].replace("TimeoutStopSec=90",
                                                                    "TimeoutStopSec=20")),
         "TimeoutStopSec 20"),
        ("systemd variable", lambda d: d.update(env=d["env"].replace("TOMOD_TOKENS_FILE=",
                                                                      "TOMOD_TOKENS=")),
         "TOMOD_TOKENS_FILE"),
        ("Dockerfile root", lambda d: d.update(dockerfile=d["dockerfile"].replace(
            "USER 10001:10001", "USER root")), "not a numeric non-root uid"),
    ]


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    root, tomod_binary = sys.argv[1], os.path.abspath(sys.argv[2])
    flags = tomod_flags(tomod_binary)
    data = load(root)
    problems = check(data, flags, tomod_binary)
    for problem in problems:
        print(f"FAIL {problem}")
    failed = bool(problems)
    for what, change, expected in mutations():
        broken = copy.deepcopy(data)
        change(broken)
        found = check(broken, flags, tomod_binary, verify_unit=False)
        if not any(expected in p for p in found):
            print(f"FAIL the check misses a broken copy ({what}): wanted {expected!r} in "
                  f"{found}")
            failed = True
    if not failed:
        print(f"deploy checks pass: {len(data['kubernetes'])} Kubernetes files, compose, "
              f"systemd, Dockerfile; {len(mutations())} broken copies caught")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
