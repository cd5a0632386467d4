"""What the proxy benchmarks share: a `causeway cluster` serving the IFRT
proxy, the environments of a JAX process through it and of plain JAX, one
measured side run as a fresh Python process, and a median with its range."""

import contextlib
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def add_causeway_argument(parser):
    parser.add_argument("--causeway", default=os.path.join(ROOT, "build", "bin", "causeway"))


@contextlib.contextmanager
def proxy_cluster(causeway, hosts, devices_per_host, with_pid=False, flags=(), log=None):
    """One island of `hosts` worker processes and the proxy, on loopback
    (`flags`: more of `causeway cluster`'s; `log`: a file its members' log
    lines go to, INFO and up): yields the (head, proxy) addresses (and the `causeway
    cluster` process's pid, whose children are the head, workers and proxy,
    with `with_pid`); stops the cluster afterwards."""
    cluster = subprocess.Popen(
        [causeway, "cluster", "--islands", "1", "--hosts-per-island", str(hosts),
         "--devices-per-host", str(devices_per_host), "--proxy-listen", "127.0.0.1:0",
         "--proxy-python", sys.executable, *flags],
        stdout=subprocess.PIPE, stderr=log or subprocess.DEVNULL, text=True,
        env=dict(os.environ, CAUSEWAY_LOG_LEVEL="0") if log else None)
    try:
        head = proxy = None
        for line in cluster.stdout:
            m = re.match(r"(head|proxy) listening on (\S+)", line)
            if m and m.group(1) == "head":
                head = m.group(2)
            elif m:
                proxy = m.group(2)
                break
        if head is None or proxy is None:
            raise SystemExit("the cluster or its proxy did not start")
        yield (head, proxy, cluster.pid) if with_pid else (head, proxy)
    finally:
        cluster.terminate()
        cluster.wait(30)


def base_env():
    """This process's environment without XLA flags of its own."""
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    return env


def proxy_env(proxy):
    """Unmodified JAX through the proxy at `proxy`."""
    return dict(base_env(), JAX_PLATFORMS="proxy", JAX_BACKEND_TARGET=f"grpc://{proxy}",
                IFRT_PROXY_USE_INSECURE_GRPC_CREDENTIALS="true")


def local_env(devices=4):
    """Plain JAX on its CPU backend with `devices` host devices."""
    return dict(base_env(), JAX_PLATFORMS="cpu",
                XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")


def run_side(code, env, args=()):
    """Runs `code` in a fresh Python process; the JSON of its `RESULT ` line."""
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env,
                         capture_output=True, text=True, timeout=900)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"measurement failed:\n{out.stdout}\n{out.stderr[-4000:]}")


def spread(values, fmt="{:,.2f}"):
    """"median (min–max)" of `values`."""
    return (f"{fmt.format(statistics.median(values))} "
            f"({fmt.format(min(values))}–{fmt.format(max(values))})")
