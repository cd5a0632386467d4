"""deploy/: the Kubernetes manifests and the image recipe (docs/deploy.md).

- The manifests pass a real Kubernetes schema validator
  (`kubernetes-validate --strict`, which bundles the API's schemas: no
  network), and the same validator refuses a misspelt field.
- Their ports hang together: every probe and Service names a port its
  container declares, and every declared port is one the container's own
  command line listens on.
- Their container command lines run: the head pod's containers and the
  worker StatefulSet's pods are started here as local processes, with
  what Kubernetes would give them stood in for on loopback (the downward
  API's pod IP and labels, the Secret and the volume as files, the
  Service's name as the head's address, each fixed port as a free one).
  A flag that does not exist, or a value a command refuses, fails the
  test. Each process is waited for by the line it prints when ready, its
  probes are asked as the kubelet would ask them, and the head shows the
  workers on the island their label names. Every process is stopped.
- The image (deploy/Dockerfile) installs every Debian package that
  provides a shared library the binary links, and lays out every
  /opt/causeway path the manifests name.
"""
import glob
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
import yaml

from conftest import BUILD, CAUSEWAY, ROOT

DEPLOY = os.path.join(ROOT, "deploy")
MANIFESTS = sorted(glob.glob(os.path.join(DEPLOY, "k8s", "*.yaml")))
VALIDATOR = os.path.join(os.path.dirname(sys.executable), "kubernetes-validate")
IMAGE_ROOT = "/opt/causeway"

# What each command prints once the address a flag names is listening:
# (command, flag) -> the line's pattern, its group 1 the address.
READY_LINES = {
    ("head", "--listen"): r"head listening on (\S+)",
    ("head", "--http-listen"): r"http listening on (\S+)",
    ("proxy", "--listen"): r"proxy listening on (\S+)",
    ("worker", "--health-listen"): r"health listening on (\S+)",
    ("worker", "--data-plane-listen"): r"worker host \d+ ready: .*data plane (\S+)\)",
}
# The line each command prints once it is ready as a whole.
READY = {"head": "head listening on ", "proxy": "proxy listening on ",
         "worker": "worker host "}


def documents():
    """Every Kubernetes object of deploy/k8s, in file order."""
    objects = []
    for path in MANIFESTS:
        with open(path) as f:
            objects += [d for d in yaml.safe_load_all(f) if d is not None]
    return objects


def find(objects, kind, name=None):
    found = [o for o in objects if o["kind"] == kind
             and (name is None or o["metadata"]["name"] == name)]
    assert found, f"no {kind} {name or ''} in deploy/k8s"
    return found


def validate(*paths):
    return subprocess.run([VALIDATOR, "--strict", *paths], capture_output=True,
                          text=True, timeout=120)


def test_there_are_manifests_for_the_head_the_workers_and_the_token():
    objects = documents()
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {("Deployment", "causeway-head"), ("Service", "causeway-head"),
            ("Secret", "causeway-token")} <= kinds, kinds
    assert find(objects, "StatefulSet")


def test_the_manifests_pass_the_kubernetes_schema_validator():
    result = validate(*MANIFESTS)
    assert result.returncode == 0, result.stdout + result.stderr
    passed = re.findall(r"passed for resource (\S+)", result.stdout + result.stderr)
    assert len(passed) == len(documents()), result.stdout + result.stderr


def test_the_validator_refuses_a_misspelt_field(tmp_path):
    with open(os.path.join(DEPLOY, "k8s", "head.yaml")) as f:
        text = f.read()
    assert "livenessProbe:" in text
    bad = tmp_path / "head.yaml"
    bad.write_text(text.replace("livenessProbe:", "livenesProbe:", 1))
    result = validate(str(bad))
    assert result.returncode != 0
    assert "'livenesProbe' was unexpected" in result.stdout + result.stderr, result


def pod_templates(objects):
    """(workload, its pod template) for every Deployment and StatefulSet."""
    return [(o, o["spec"]["template"]) for o in objects
            if o["kind"] in ("Deployment", "StatefulSet")]


def flag_value(args, flag):
    return args[args.index(flag) + 1] if flag in args else None


def test_every_probe_and_service_names_a_port_that_is_listened_on():
    objects = documents()
    for workload, template in pod_templates(objects):
        for container in template["spec"]["containers"]:
            where = f"{workload['metadata']['name']}/{container['name']}"
            ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
            args = container["args"]
            # Each declared port is the port of an address the command listens on.
            listened = {int(a.rsplit(":", 1)[1]) for a in args
                        if re.fullmatch(r"[^\s:]+:\d+", a)}
            for name, number in ports.items():
                assert number in listened, f"{where}: port {name} ({number}) is not in {args}"
            for kind in ("readinessProbe", "livenessProbe"):
                probe = container.get(kind)
                assert probe is not None, f"{where} has no {kind}"
                action = probe.get("httpGet") or probe.get("tcpSocket")
                assert action["port"] in ports, f"{where}: {kind} port {action['port']}"
            assert container["resources"]["requests"], where
    for service in find(objects, "Service"):
        selector = service["spec"]["selector"]
        matched = [t for _, t in pod_templates(objects)
                   if selector.items() <= t["metadata"]["labels"].items()]
        assert matched, f"service {service['metadata']['name']} selects no pod"
        names = {p["name"] for t in matched for c in t["spec"]["containers"]
                 for p in c.get("ports", [])}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in names, (service["metadata"]["name"], port)


class Process:
    """A container's command line run here: its output read by a thread
    (so it never blocks), lines waited for with a deadline, stopped by its
    pid."""

    def __init__(self, name, argv, env):
        self.name, self.argv = name, argv
        self.lines, self._queue = [], queue.Queue()
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, text=True,
                                        env={**os.environ, **env})
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def output(self):
        return "\n".join(self.lines)

    def wait_for(self, pattern, timeout=90.0):
        """The match of the first line (read so far or later) that
        `pattern` matches."""
        for line in self.lines:
            if m := re.search(pattern, line):
                return m
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"{self.name}: no line like {pattern!r} in time:\n"
                                     f"{' '.join(self.argv)}\n{self.output()}")
            if line is None:
                raise AssertionError(f"{self.name} exited ({self.process.wait()}) before "
                                     f"{pattern!r}:\n{' '.join(self.argv)}\n{self.output()}")
            if m := re.search(pattern, line):
                return m

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)
        self._reader.join(30)


def expand(text, env):
    """Kubernetes' $(VAR) expansion of command and args ($$ escapes)."""
    def one(m):
        if m[0].startswith("$$"):
            return m[0][1:]
        assert m[1] in env, f"$({m[1]}) is not in the container's env"
        return env[m[1]]
    return re.sub(r"\$\$\([A-Za-z_][A-Za-z0-9_]*\)|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one, text)


def image_path(path):
    """An /opt/causeway path of the image, in this checkout."""
    if path == IMAGE_ROOT + "/build" or path.startswith(IMAGE_ROOT + "/build/"):
        local = BUILD + path[len(IMAGE_ROOT + "/build"):]
    else:
        local = ROOT + path[len(IMAGE_ROOT):]
    assert os.path.exists(local), f"{path} stands for {local}, which is missing"
    return local


class Pod:
    """One pod of a template, run here: its volumes as folders."""

    def __init__(self, objects, name, template, tmp_path):
        self.name, self.template = name, template
        self.folders = {}
        for volume in template["spec"].get("volumes", []):
            folder = tmp_path / name / volume["name"]
            folder.mkdir(parents=True)
            if "secret" in volume:
                (secret,) = find(objects, "Secret", volume["secret"]["secretName"])
                for key, value in secret["stringData"].items():
                    (folder / key).write_text(value + "\n")
            else:
                assert "persistentVolumeClaim" in volume or "emptyDir" in volume, volume
            self.folders[volume["name"]] = str(folder)

    def env(self, container):
        env = {}
        for var in container.get("env", []):
            if "value" in var:
                env[var["name"]] = expand(var["value"], env)
                continue
            field = var["valueFrom"]["fieldRef"]["fieldPath"]
            if field == "status.podIP":
                env[var["name"]] = "127.0.0.1"
            elif field == "metadata.name":
                env[var["name"]] = self.name
            elif m := re.fullmatch(r"metadata\.labels\['([^']+)'\]", field):
                env[var["name"]] = self.template["metadata"]["labels"][m[1]]
            else:
                raise AssertionError(f"the test cannot stand in for {field}")
        return env

    def local_path(self, container, path):
        for mount in container.get("volumeMounts", []):
            root = mount["mountPath"]
            if path == root or path.startswith(root + "/"):
                return self.folders[mount["name"]] + path[len(root):]
        return path


def run_container(objects, pod, container, addresses, services):
    """Starts `container` of `pod` here; returns its Process once it printed
    that it is ready. `addresses` maps (pod name, container port) to the
    HOST:PORT it listens on here (filled in for this container too);
    `services` maps "name:port" to (pod name, container port)."""
    env = pod.env(container)
    argv = [expand(a, env) for a in container["command"] + container["args"]]
    argv[0] = image_path(argv[0])
    command = argv[1]
    own_ports = {p["containerPort"] for p in container.get("ports", [])}
    listening = {}  # flag -> container port
    for i in range(2, len(argv)):
        arg, flag = argv[i], argv[i - 1]
        if arg.startswith(IMAGE_ROOT + "/"):
            argv[i] = image_path(arg)
        elif arg.startswith("/"):
            argv[i] = pod.local_path(container, arg)
        elif m := re.fullmatch(r"([^\s:]+):(\d+)", arg):
            host, port = m[1], int(m[2])
            if arg in services:
                argv[i] = addresses[services[arg]]
            elif host in ("0.0.0.0", "127.0.0.1") and port in own_ports:
                argv[i] = "127.0.0.1:0"  # It listens there: a free port.
                listening[flag] = port
            elif host == "127.0.0.1":
                assert (pod.name, port) in addresses, f"{arg}: nothing in the pod listens there"
                argv[i] = addresses[(pod.name, port)]
            else:
                raise AssertionError(f"{argv[i - 1]} {arg}: not an address the test knows")
    process = Process(f"{pod.name}/{container['name']}", argv, {})
    for flag, port in listening.items():
        assert (command, flag) in READY_LINES, f"{command} {flag}: which line says it listens?"
        addresses[(pod.name, port)] = process.wait_for(READY_LINES[(command, flag)])[1]
    process.wait_for("^" + re.escape(READY[command]))
    return process


def probe(container, kind, pod, addresses):
    """What the kubelet would see: an HTTP status, or "open" for a TCP port."""
    spec = container[kind]
    action = spec.get("httpGet") or spec.get("tcpSocket")
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    address = addresses[(pod.name, ports.get(action["port"], action["port"]))]
    if "tcpSocket" in spec:
        host, port = address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10):
            return "open"
    try:
        with urllib.request.urlopen(f"http://{address}{action['path']}",
                                    timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_manifests_command_lines_start_a_working_cluster_here(tmp_path):
    objects = documents()
    (head,) = find(objects, "Deployment", "causeway-head")
    statefulsets = find(objects, "StatefulSet")
    # "causeway-head:7070" (the Service's name and port) -> the head pod's
    # container port behind it.
    head_ports = {p["name"]: p["containerPort"]
                  for c in head["spec"]["template"]["spec"]["containers"]
                  for p in c.get("ports", [])}
    (service,) = find(objects, "Service", "causeway-head")
    services = {f"causeway-head:{p['port']}": ("head", head_ports[p["targetPort"]])
                for p in service["spec"]["ports"]}
    addresses, running = {}, []
    try:
        head_pod = Pod(objects, "head", head["spec"]["template"], tmp_path)
        for container in head_pod.template["spec"]["containers"]:
            running.append(run_container(objects, head_pod, container, addresses, services))
            for kind in ("readinessProbe", "livenessProbe"):
                assert probe(container, kind, head_pod, addresses) in (200, "open"), (
                    container["name"], kind)
        workers = []
        for statefulset in statefulsets:
            template = statefulset["spec"]["template"]
            for ordinal in range(statefulset["spec"]["replicas"]):
                pod = Pod(objects, f"{statefulset['metadata']['name']}-{ordinal}",
                          template, tmp_path)
                (container,) = template["spec"]["containers"]
                running.append(run_container(objects, pod, container, addresses, services))
                workers.append((pod, container, running[-1]))
        for pod, container, process in workers:
            assert probe(container, "livenessProbe", pod, addresses) == 200
            assert probe(container, "readinessProbe", pod, addresses) == 200
        # The head sees every worker alive, on the island its label names,
        # with the devices its command line gives.
        token_file = head_pod.local_path(
            head_pod.template["spec"]["containers"][0], "/etc/causeway/token/token")
        with open(token_file) as f:
            token = f.read().strip()
        http = addresses[("head", head_ports["http"])]
        request = urllib.request.Request(f"http://{http}/api/status",
                                         headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            status = json.load(response)
        hosts = {h["host"]: h for h in status["hosts"]}
        assert len(hosts) == len(workers)
        assert all(h["state"] == "alive" for h in hosts.values()), hosts
        for pod, container, process in workers:
            m = process.wait_for(r"worker host (\d+) ready: devices (\d+)\.\.(\d+) on island (\d+)")
            host, first, last, island = map(int, m.groups())
            assert island == int(pod.template["metadata"]["labels"]["causeway.dev/island"])
            assert hosts[host]["island"] == island
            assert last - first + 1 == int(flag_value(container["args"], "--devices"))
        # Without the token the head's data answers 401; its probe is open.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://{http}/api/status", timeout=30)
        assert refused.value.code == 401
        # The head goes (its pod restarted, say): each worker says so and
        # registers again, no longer ready but still alive.
        head_process = running[0]
        head_process.stop()
        for pod, container, process in workers:
            process.wait_for("registering again")
            try:
                assert probe(container, "readinessProbe", pod, addresses) == 503
                assert probe(container, "livenessProbe", pod, addresses) == 200
            except (AssertionError, OSError) as error:
                raise AssertionError(f"{pod.name}: {error}\n{process.output()}") from error
    finally:
        for process in reversed(running):
            process.stop()


def dockerfile_stages():
    """{stage name: its lines} of deploy/Dockerfile (continuations joined)."""
    with open(os.path.join(DEPLOY, "Dockerfile")) as f:
        text = re.sub(r"\\\n", " ", f.read())
    stages, current = {}, None
    for line in text.splitlines():
        line = line.strip()
        if m := re.match(r"FROM\s+\S+(?:\s+AS\s+(\S+))?", line, re.I):
            current = m[1] or f"stage{len(stages)}"
            stages[current] = [line]
        elif line and not line.startswith("#") and current is not None:
            stages[current].append(line)
    return stages


@pytest.mark.skipif(shutil.which("dpkg") is None or shutil.which("ldd") is None,
                    reason="needs Debian's dpkg and ldd")
def test_the_image_installs_every_library_the_binary_links():
    stages = dockerfile_stages()
    runtime = list(stages.values())[-1]
    installed = set()
    for line in runtime:
        if "apt-get install" in line:
            words = line.split("apt-get install", 1)[1].split("&&")[0].split()
            installed |= {w for w in words if re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", w)}
    libraries = re.findall(r"=> (/\S+)", subprocess.run(
        ["ldd", CAUSEWAY], capture_output=True, text=True, check=True).stdout)
    assert libraries
    # A package may have registered the file under /lib or /usr/lib (the
    # same folder on a merged /usr), by its link's name or the file's: all
    # are asked about in one dpkg call (it answers "package[:arch]: path"
    # for those it knows).
    candidates = {library: {library, os.path.realpath(library),
                            re.sub(r"^/usr/", "/", os.path.realpath(library))}
                  for library in libraries}
    owners = {}
    answer = subprocess.run(["dpkg", "-S", *sorted(set().union(*candidates.values()))],
                            capture_output=True, text=True)
    for line in answer.stdout.splitlines():
        package, path = line.split(": ", 1)
        owners[path] = package.split(",")[0].split(":")[0]
    packages = {}
    for library, paths in candidates.items():
        found = [owners[p] for p in paths if p in owners]
        assert found, f"{library}: no Debian package provides it\n{answer.stderr}"
        packages[found[0]] = library
    missing = {p: lib for p, lib in packages.items() if p not in installed}
    assert not missing, f"deploy/Dockerfile's runtime stage lacks {missing}"


def test_the_image_lays_out_every_path_the_manifests_name():
    runtime = list(dockerfile_stages().values())[-1]
    copied = [line.split()[-1].rstrip("/") for line in runtime if line.startswith("COPY")]
    named = set()
    for _, template in pod_templates(documents()):
        for container in template["spec"]["containers"]:
            named |= {a for a in container["command"] + container["args"]
                      if a.startswith(IMAGE_ROOT + "/")}
    assert named
    for path in named:
        assert any(path == c or path.startswith(c + "/") for c in copied), (
            f"{path} is named by a manifest but not copied into the image: {copied}")
