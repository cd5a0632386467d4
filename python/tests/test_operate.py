"""The head's HTTP endpoint, `causeway top` and `causeway trace` on a real
multi-process cluster (`causeway cluster --http-listen`, started by the
tests on loopback and always stopped): /api/status matches the cluster,
/metrics parses as Prometheus text (prometheus_client's parser and a strict
reading of our own) and its counters move with the work done, a token is
required, a killed worker shows dead with its reason, `top` draws a row per
device (once, and live inside tmux).

Needs only the `causeway` binary (not the Python package).
"""
import json
import math
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import CAUSEWAY, ProcessCluster, run_causeway

TOKEN = "operate-test-token-0123456789"
HTTP_LINE = "http listening on "

TIMES_TWO = """HloModule times_two, num_partitions=2

ENTRY %main (x: f32[1]) -> f32[1] {
  %x = f32[1] parameter(0), sharding={devices=[2]<=[2]}
  %c = f32[] constant(2)
  %cb = f32[1] broadcast(%c), dimensions={}
  ROOT %y = f32[1] multiply(%x, %cb), sharding={devices=[2]<=[2]}
}
"""


@pytest.fixture(scope="module")
def token_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("operate") / "token"
    path.write_text(TOKEN + "\n")
    return str(path)


def start_cluster(token_file):
    """One island of two workers with two devices each, behind a token, its
    HTTP endpoint on a free port. Returns (cluster, http address)."""
    cluster = ProcessCluster("--islands", 1, "--hosts-per-island", 2, "--devices-per-host", 2,
                             "--token-file", token_file, "--http-listen", "127.0.0.1:0")
    try:
        http = cluster.line_starting_with(HTTP_LINE)[len(HTTP_LINE):].strip()
    except BaseException:
        cluster.stop()
        raise
    return cluster, http


@pytest.fixture(scope="module")
def served(token_file):
    cluster, http = start_cluster(token_file)
    yield cluster, http
    cluster.stop()


def get(http, path, token=TOKEN):
    """(status, body) of GET http://HTTP/PATH, with the token if any."""
    request = urllib.request.Request(f"http://{http}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def status(http):
    code, body = get(http, "/api/status")
    assert code == 200, body
    return json.loads(body)


def run_times_two(cluster, token_file, tmp_path):
    program = tmp_path / "times_two.hlo"
    program.write_text(TIMES_TWO)
    x = tmp_path / "x.npy"
    np.save(x, np.array([[1.5], [-4.0]], np.float32))
    out = tmp_path / "out"
    run_causeway("run", program, "--partitions", 2, "--input", x, "--output-dir", out,
                 "--cluster", cluster.address, "--token-file", token_file)
    (result,) = [np.load(out / name) for name in os.listdir(out)]
    np.testing.assert_array_equal(result.reshape(-1), [3.0, -8.0])


def strict_samples(text):
    """Our own strict reading: every sample's family is typed first and
    prefixed causeway_, counters end in _total, histogram buckets rise."""
    types, samples = {}, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name not in types, line
            types[name] = kind
        elif line and not line.startswith("#"):
            name = line.split("{")[0].split(" ")[0]
            assert name.startswith("causeway_"), line
            family = name
            for suffix in ("_bucket", "_sum", "_count"):
                if name.endswith(suffix) and types.get(name[:-len(suffix)]) == "histogram":
                    family = name[:-len(suffix)]
            assert family in types, f"untyped: {line}"
            if types[family] == "counter":
                assert family.endswith("_total"), line
            samples.append(line)
    return types, samples


def metric_values(text):
    """{(name, frozenset(labels)): value}, through prometheus_client."""
    values = {}
    for family in text_string_to_metric_families(text):
        if family.type == "histogram":
            buckets = [s for s in family.samples if s.name.endswith("_bucket")]
            bounds = [float(s.labels["le"]) for s in buckets]
            counts = [s.value for s in buckets]
            assert bounds == sorted(bounds) and math.isinf(bounds[-1]), family.name
            assert counts == sorted(counts), family.name
        for sample in family.samples:
            values[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return values


DEVICE_ROW = re.compile(r"^\s*(\d+)\s+\d+\s+\d+\s+(busy|waiting|idle|spare|dead|unknown)\s")


def device_rows(screen):
    """The device ids of `top`'s device rows, in order."""
    return sorted(int(m[1]) for line in screen.splitlines() if (m := DEVICE_ROW.match(line)))


def test_the_status_json_matches_the_cluster(served):
    cluster, http = served
    s = status(http)
    assert s["schema"] == 1
    assert s["summary"]["devices"] == 4 and s["summary"]["hosts_alive"] == 2
    assert len(s["devices"]) == 4 and len(s["hosts"]) == 2
    assert {h["host"] for h in s["hosts"]} == set(cluster.worker_pids)
    assert all(d["memory"]["budget_bytes"] == 1 << 30 for d in s["devices"])
    assert all(h["heartbeat_age_seconds"] is not None for h in s["hosts"])


def test_every_data_endpoint_needs_the_token(served):
    _, http = served
    for path in ("/api/status", "/metrics", "/trace?seconds=5"):
        code, body = get(http, path, token=None)
        assert code == 401 and "Authorization: Bearer" in body, (path, body)
        code, body = get(http, path, token="not-" + TOKEN)
        assert code == 401 and "wrong token" in body, (path, body)
    code, page = get(http, "/", token=None)
    assert code == 200 and "fetch(\"/api/status\"" in page and "sessionStorage" in page


def test_bad_requests_get_clear_errors_and_the_head_goes_on(served):
    _, http = served
    code, body = get(http, "/no/such/thing")
    assert code == 404 and "no such endpoint '/no/such/thing'" in json.loads(body)["error"]
    code, body = get(http, "/trace?seconds=soon")
    assert code == 400 and "seconds must be a number" in json.loads(body)["error"]
    assert status(http)["summary"]["hosts"] == 2


def test_metrics_parse_and_the_launch_counters_move_with_the_work(served, token_file,
                                                                    tmp_path):
    cluster, http = served
    code, before_text = get(http, "/metrics")
    assert code == 200
    types, _ = strict_samples(before_text)
    assert types["causeway_dispatch_latency_seconds"] == "histogram"
    before = metric_values(before_text)
    launches = ("causeway_launches_total", frozenset({("island", "0")}))
    run_times_two(cluster, token_file, tmp_path)
    code, after_text = get(http, "/metrics")
    strict_samples(after_text)
    after = metric_values(after_text)
    assert after[launches] == before[launches] + 1
    assert (after[("causeway_dispatch_latency_seconds_count", frozenset())] >=
            before[("causeway_dispatch_latency_seconds_count", frozenset())])
    for device in range(4):
        labels = frozenset({("device", str(device)), ("host", str(device // 2)),
                            ("island", "0")})
        assert after[("causeway_device_memory_budget_bytes", labels)] == 1 << 30
    assert len([k for k in after if k[0] == "causeway_host_heartbeat_age_seconds"]) == 2


def test_top_once_draws_a_row_for_every_device(served, token_file):
    _, http = served
    result = run_causeway("top", "--head", http, "--token-file", token_file, "--once",
                          "--width", 160)
    assert device_rows(result.stdout) == [0, 1, 2, 3], result.stdout
    assert "SESSIONS" in result.stdout and "LAST FAILURES" in result.stdout


def test_top_without_the_token_says_why(served):
    _, http = served
    result = run_causeway("top", "--head", http, "--once", check=False)
    assert result.returncode == 1 and "401" in result.stderr, result.stderr


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_top_in_tmux_repaints_and_q_quits(served, token_file):
    _, http = served
    server = f"cw-top-{uuid.uuid4().hex[:8]}"
    done = f"{server}-done"
    tmux = ["tmux", "-L", server]
    command = (f"{CAUSEWAY} top --head {http} --token-file {token_file}; "
               f"tmux -L {server} wait-for -S {done}")
    subprocess.run([*tmux, "new-session", "-d", "-x", "150", "-y", "40", command], check=True)
    try:
        deadline = time.monotonic() + 30
        screen = ""
        # Waits for the first repaint to show on the screen.
        while "q quits" not in screen:
            assert time.monotonic() < deadline, f"top did not draw:\n{screen}"
            screen = subprocess.run([*tmux, "capture-pane", "-p"], capture_output=True,
                                    text=True, check=True).stdout
        assert device_rows(screen) == [0, 1, 2, 3], screen
        assert "causeway top" in screen and "DEV" in screen
        subprocess.run([*tmux, "send-keys", "q"], check=True)
        subprocess.run([*tmux, "wait-for", done], check=True, timeout=30)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def test_trace_fetches_the_recent_work_of_every_worker(served, token_file, tmp_path):
    cluster, http = served
    run_times_two(cluster, token_file, tmp_path)
    out = tmp_path / "trace.json"
    run_causeway("trace", "--head", http, "--seconds", 60, "-o", out,
                 "--token-file", token_file)
    events = json.loads(out.read_text())["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("name") == "times_two"]
    # One op on each of the slice's two devices, on two worker processes.
    assert len({(e["pid"], e["tid"]) for e in ops}) >= 2


def test_a_killed_worker_shows_dead_with_its_reason(token_file):
    cluster, http = start_cluster(token_file)
    try:
        victim = max(cluster.worker_pids)
        cluster.kill_worker(victim)
        cluster.wait_for_line(f"causeway head: host {victim} dead: ")
        s = status(http)
        host = s["hosts"][victim]
        assert host["state"] == "dead"
        assert "connection broke" in host["death"]["reason"], host
        assert [d["state"] for d in s["devices"] if d["host"] == victim] == ["dead", "dead"]
        assert s["deaths"][0]["host"] == victim
        code, text = get(http, "/metrics")
        values = metric_values(text)
        assert values[("causeway_host_deaths_total",
                       frozenset({("reason", "connection")}))] == 1
        assert values[("causeway_hosts", frozenset({("state", "dead")}))] == 1
    finally:
        cluster.stop()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def browser(url, *flags):
    """Headless Chromium on `url` after its script ran for a while of virtual
    time; returns the CompletedProcess (stdout: the DOM with --dump-dom)."""
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--virtual-time-budget=3000", *flags, url],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (Debian: apt-get install chromium)")
def test_the_page_in_a_browser_shows_every_device_and_a_dead_one(tmp_path):
    cluster = ProcessCluster("--islands", 1, "--hosts-per-island", 2, "--devices-per-host", 2,
                             "--http-listen", "127.0.0.1:0")
    try:
        http = cluster.line_starting_with(HTTP_LINE)[len(HTTP_LINE):].strip()
        victim = max(cluster.worker_pids)
        cluster.kill_worker(victim)
        cluster.wait_for_line(f"causeway head: host {victim} dead: ")
        dom = browser(f"http://{http}/#device=0", "--dump-dom").stdout
        states = {int(d): s for s, d in re.findall(r'class="dev s-(\w+)(?: sel)?" data-dev="(\d+)"',
                                                  dom)}
        assert sorted(states) == [0, 1, 2, 3], dom
        dead = [d for d, s in states.items() if s == "dead"]
        assert dead == [2 * victim, 2 * victim + 1], states
        assert "its connection broke" in dom
        # The device named in the address is shown with its queue.
        assert "<h2>Device 0</h2>" in dom and "queued (0)" in dom
        shot = tmp_path / "page.png"
        browser(f"http://{http}/", f"--screenshot={shot}", "--window-size=1400,900")
        assert shot.stat().st_size > 10_000
    finally:
        cluster.stop()


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (Debian: apt-get install chromium)")
def test_with_a_token_the_page_asks_for_it(served):
    _, http = served
    dom = browser(f"http://{http}/", "--dump-dom").stdout
    assert "This head needs a token" in dom
    assert 'id="login" style="display: flex;"' in dom, dom
    assert not re.search(r'data-dev="\d', dom)


def wait_for_history(http, done, token=TOKEN, timeout=30):
    """/api/history once `done(history)` holds (polled with a deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        code, body = get(http, "/api/history", token=token)
        assert code == 200, body
        history = json.loads(body)
        if done(history):
            return history
        assert time.monotonic() < deadline, f"not in the history in time: {history}"


def test_the_history_outlives_a_head_restart(token_file, tmp_path):
    """A finished session and a host death are kept in the --history-file;
    a head started again on the same file serves them at /api/history."""
    file = tmp_path / "history.db"
    args = ("--islands", 1, "--hosts-per-island", 2, "--devices-per-host", 1,
            "--token-file", token_file, "--http-listen", "127.0.0.1:0",
            "--history-file", file)
    cluster = ProcessCluster(*args)
    try:
        http = cluster.line_starting_with(HTTP_LINE)[len(HTTP_LINE):].strip()
        run_times_two(cluster, token_file, tmp_path)
        first = wait_for_history(http, lambda h: h["sessions"])
        assert first["file"] == str(file) and first["head_run"] == 1
        victim = max(cluster.worker_pids)
        cluster.kill_worker(victim)
        wait_for_history(http, lambda h: h["host_deaths"])
    finally:
        cluster.stop()
    restarted = ProcessCluster(*args)
    try:
        http = restarted.line_starting_with(HTTP_LINE)[len(HTTP_LINE):].strip()
        history = wait_for_history(http, lambda h: True)
        assert history["schema"] == 1 and history["head_run"] == 2
        (session,) = history["sessions"]
        assert session["head_run"] == 1 and session["end_reason"] == "it was closed"
        assert session["complete"] and session["launches"] == 1 and session["failed_ops"] == 0
        (program,) = session["programs"]
        assert program["program"] == "times_two"
        assert program["launches"] == 1 and program["ops"] == 2 and program["failures"] == []
        assert program["device_seconds"] >= 0
        assert session["opened_unix_seconds"] <= session["ended_unix_seconds"]
        # The killed worker, then (as the cluster stopped) the other one.
        deaths = history["host_deaths"]
        assert [d["head_run"] for d in deaths] == [1] * len(deaths)
        death = deaths[-1]  # Newest first: the oldest is the kill.
        assert death["host"] == victim and "connection broke" in death["reason"], deaths
        # The same history in the page's own request needs the token too.
        assert get(http, "/api/history", token=None)[0] == 401
    finally:
        restarted.stop()


def test_with_log_format_json_every_stderr_line_is_a_json_object(tmp_path):
    """`causeway cluster --log-format json` passes the flag to its head and
    workers; everything on its stderr (its members' lines included, and a
    worker's death) is one JSON object per line with the documented fields."""
    stderr_path = tmp_path / "stderr"
    with open(stderr_path, "w") as stderr:
        process = subprocess.Popen(
            [CAUSEWAY, "cluster", "--islands", "1", "--hosts-per-island", "2",
             "--devices-per-host", "1", "--log-format", "json"],
            stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL, text=True)
        try:
            pids = {}
            for line in process.stdout:
                if m := re.match(r"pid (\d+): worker host (\d+) ready", line):
                    pids[int(m[2])] = int(m[1])
                if line.startswith("head listening on "):
                    break
            assert len(pids) == 2, pids
            os.kill(pids[1], signal.SIGKILL)
            # The head's line about it reaches the cluster's stderr.
            deadline = time.monotonic() + 30
            while "host 1 dead" not in stderr_path.read_text():
                assert time.monotonic() < deadline, stderr_path.read_text()
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
    lines = stderr_path.read_text().splitlines()
    assert lines
    records = [json.loads(line) for line in lines]
    for record in records:
        assert {"time", "level", "process", "host", "pid", "message"} <= record.keys(), record
    assert {r["process"] for r in records} >= {"cluster"}
    assert any("host 1 dead" in r["message"] for r in records), records
