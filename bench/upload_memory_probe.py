"""Times 1 GiB uploads to a `causeway cluster` (one worker, one device) and
reads the head's and the worker's resident memory (VmRSS) after each, and
after the session ends (issue 19: memory after a 1 GiB upload, the slow first
upload). A diagnostic, not a benchmark for the record: it has no baseline.

    .venv/bin/python bench/upload_memory_probe.py build/bin/causeway [ROUNDS]
"""
import re, subprocess, sys, time
import numpy as np
CAUSEWAY = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
proc = subprocess.Popen([CAUSEWAY, "cluster", "--islands", "1", "--hosts-per-island", "1",
                         "--devices-per-host", "1", "--memory-per-device", "4G"],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
pids = {}
address = None
for line in proc.stdout:
    if m := re.search(r"causeway cluster: head, pid (\d+)", line):
        pids["head"] = int(m[1])
    if m := re.search(r"causeway cluster: worker \d+ \(island \d+\), pid (\d+)", line):
        pids["worker"] = int(m[1])
    if line.startswith("head listening on "):
        address = line.split()[-1]
        break
def rss(name):
    with open(f"/proc/{pids[name]}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read())[1]) // 1024
try:
    import causeway
    print("start: head", rss("head"), "MB, worker", rss("worker"), "MB", flush=True)
    causeway.connect(address, connect_timeout=60)
    s = causeway.make_virtual_device_set().add_slice(devices=1)
    x = np.ones(256 << 20, np.float32)
    for i in range(ROUNDS):
        t = time.perf_counter()
        a = causeway.device_put(x, s)
        a.block_until_ready(timeout=300)
        dt = time.perf_counter() - t
        print(f"upload {i}: {dt:.2f} s; head {rss('head')} MB, worker {rss('worker')} MB", flush=True)
        a.delete()
    causeway.disconnect()
    time.sleep(2)  # A probe, not a test: let the session's end reach the head.
    print("after the session: head", rss("head"), "MB, worker", rss("worker"), "MB", flush=True)
finally:
    proc.terminate()
    proc.wait(30)
