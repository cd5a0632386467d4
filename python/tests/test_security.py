"""Attacks on a running cluster, made as a foreign process on the same host
would make them (docs/security.md): to the ports it listens on (the head's
gRPC and HTTP ports, each worker's data plane), without credentials, with a
wrong token, with a replayed handshake and with garbage. Each is refused,
and the cluster goes on serving its members. (A valid handshake followed by
garbage, and the collectives' ports, are attacked in the C++ tests:
TcpDataPlaneTest, GlooMeshTest.)
"""
import hashlib
import hmac
import os
import re
import socket
import struct
import urllib.error
import urllib.request
from http.client import HTTPException

import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import causeway
from conftest import ProcessCluster

TOKEN = "the-security-test-token"
HTTP_LINE = "http listening on "
READY = re.compile(r"worker host (\d+) ready: .*data plane ([0-9.]+:\d+)\)")

# The data plane's handshake (src/causeway/transport/tcp_wire.h).
MAGIC = 0x50445743
VERSION = 3
OK, UNAUTHENTICATED, PERMISSION_DENIED, FAILED_PRECONDITION = 0, 16, 7, 9


@pytest.fixture(scope="module")
def token_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("security") / "token"
    path.write_text(TOKEN + "\n")
    return str(path)


@pytest.fixture(scope="module")
def guarded(token_file):
    """One island of two one-device workers behind a token, with its HTTP
    endpoint: (cluster, http address, {host: data-plane address})."""
    cluster = ProcessCluster("--islands", 1, "--hosts-per-island", 2, "--devices-per-host", 1,
                             "--token-file", token_file, "--http-listen", "127.0.0.1:0")
    try:
        http = cluster.line_starting_with(HTTP_LINE)[len(HTTP_LINE):].strip()
        planes = {int(m[1]): m[2] for line in cluster.lines if (m := READY.search(line))}
        assert len(planes) == 2, cluster.output()
        yield cluster, http, planes
    finally:
        cluster.stop()


def dial(address):
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def read_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def closed_by_peer(sock):
    """True once the other side ends the connection (within the timeout)."""
    try:
        while sock.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def hello(sender, nonce, sealed=1):
    """A data-plane hello; `sealed` (flag bit 0): the dialler seals what
    follows, as every worker of a cluster with a token does."""
    return struct.pack("<IHHqQQ", MAGIC, VERSION, sealed, sender, 5, 0) + nonce


def proof(token, side, hello_bytes, listener_nonce):
    label = f"causeway data plane: {side}".encode()
    return hmac.new(token.encode(), label + hello_bytes + listener_nonce, hashlib.sha256).digest()


def handshake(sock, sender, token, hello_bytes=None, answer=None):
    """Dials the data plane's handshake as host `sender` proving `token`
    (or sending `answer` as the proof); the reply's status code, or None if
    the connection ended first. Returns (code, hello bytes, proof sent)."""
    hello_bytes = hello_bytes or hello(sender, os.urandom(32))
    sock.sendall(hello_bytes)
    challenge = read_exactly(sock, 76)
    if challenge is None:
        return None, hello_bytes, None
    magic, version, code, message = struct.unpack("<IHHI", challenge[:12])
    assert magic == MAGIC and version == VERSION and code == OK, (code, challenge)
    listener_nonce = challenge[12:44]
    if token == TOKEN:  # The worker proves the token it shares with us.
        assert hmac.compare_digest(challenge[44:76],
                                   proof(token, "listener", hello_bytes, listener_nonce))
    sent = answer if answer is not None else proof(token, "dialler", hello_bytes, listener_nonce)
    sock.sendall(sent)
    reply = read_exactly(sock, 12)
    if reply is None:
        return None, hello_bytes, sent
    _, _, code, length = struct.unpack("<IHHI", reply)
    read_exactly(sock, length)
    return code, hello_bytes, sent


def test_the_head_refuses_foreign_clients_and_garbage(guarded, token_file):
    cluster, _, _ = guarded
    with pytest.raises(causeway.UnauthenticatedError):
        causeway.connect(cluster.address, connect_timeout=60)
    with pytest.raises(causeway.UnauthenticatedError):
        causeway.connect(cluster.address, token="a guess", connect_timeout=60)
    with dial(cluster.address) as sock:
        sock.sendall(os.urandom(4096))  # Not HTTP/2: gRPC hangs up.
        assert closed_by_peer(sock)


def test_the_http_endpoint_refuses_requests_without_the_token(guarded):
    _, http, _ = guarded
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://{http}/api/status", timeout=30)
    assert refused.value.code == 401


def test_the_data_plane_refuses_every_foreign_connection(guarded):
    _, _, planes = guarded
    address = next(iter(planes.values()))
    member = next(iter(planes))  # A host the worker knows: only the proof is missing.
    with dial(address) as sock:  # No token at all (the empty key).
        assert handshake(sock, member, "")[0] == UNAUTHENTICATED
    with dial(address) as sock:  # A wrong token.
        assert handshake(sock, member, "a guess")[0] == UNAUTHENTICATED
    with dial(address) as sock:  # Garbage.
        sock.sendall(os.urandom(4096))
        assert closed_by_peer(sock)
    # A token holder's handshake recorded byte for byte, replayed on a new
    # connection: the worker's nonce is new, so the recorded proof is wrong.
    # (A host it does not know: the proof is checked first.)
    with dial(address) as sock:
        code, recorded_hello, recorded_proof = handshake(sock, 9999, TOKEN)
        assert code == PERMISSION_DENIED  # Proven, but not a member.
    with dial(address) as sock:
        assert handshake(sock, 9999, TOKEN, hello_bytes=recorded_hello,
                         answer=recorded_proof)[0] == UNAUTHENTICATED


def test_a_flood_of_idle_connections_stalls_neither_the_head_nor_a_worker(guarded, token_file):
    cluster, _, planes = guarded
    flood = []
    try:
        for address in (cluster.address, *planes.values()):
            flood += [dial(address) for _ in range(1000)]
        # A slow sender: half a data-plane hello, then nothing.
        slow = dial(next(iter(planes.values())))
        flood.append(slow)
        slow.sendall(hello(next(iter(planes)), os.urandom(32))[:20])
        client = causeway.connect(cluster.address, token_file=token_file, connect_timeout=60)
        try:
            s = causeway.make_virtual_device_set().add_slice(devices=2, island=0)
            summed = causeway.jit(lambda x: x + 1, devices=s)(np.zeros(4, np.float32))
            np.testing.assert_array_equal(np.asarray(summed), np.ones(4))
        finally:
            causeway.disconnect()
    finally:
        for sock in flood:
            sock.close()


def test_the_cluster_serves_its_members_after_the_attacks(guarded, token_file):
    cluster, _, planes = guarded
    address = next(iter(planes.values()))
    member = next(iter(planes))
    # Even with the token, posing as a member at another incarnation is
    # refused (the worker's peer table has the member's own).
    with dial(address) as sock:
        assert handshake(sock, member, TOKEN)[0] not in (None, OK)
    client = causeway.connect(cluster.address, token_file=token_file, connect_timeout=60)
    try:
        s = causeway.make_virtual_device_set().add_slice(devices=2, island=0)
        doubled = causeway.jit(lambda x: x * 2, devices=s)(np.arange(8, dtype=np.float32))
        np.testing.assert_array_equal(np.asarray(doubled), np.arange(8) * 2)
        assert len(client.devices()) == 2
    finally:
        causeway.disconnect()


def test_a_dialler_without_encryption_is_refused_even_with_the_token(guarded):
    _, _, planes = guarded
    address = next(iter(planes.values()))
    member = next(iter(planes))
    # A token holder that would send frames in clear (no sealing flag):
    # refused after the proofs, so a downgrade cannot be forced on the way
    # (the flag is inside the hello both proofs cover).
    with dial(address) as sock:
        code, _, _ = handshake(sock, member, TOKEN,
                               hello_bytes=hello(member, os.urandom(32), sealed=0))
        assert code == FAILED_PRECONDITION


def test_a_sealed_cluster_moves_and_reduces_arrays_across_workers(guarded, token_file):
    # Every transfer between the two worker processes goes over the sealed
    # data plane, every cross-worker collective over sealed Gloo pairs.
    # Both steps stay on the one slice of both devices: the cluster has two,
    # so a second slice would wait for them until this one is released.
    cluster, _, _ = guarded
    causeway.connect(cluster.address, token_file=token_file, connect_timeout=60)
    try:
        two = causeway.make_virtual_device_set().add_slice(devices=2, island=0)
        value = np.arange(64, dtype=np.float32).reshape(8, 8)
        a = causeway.device_put(value, two, P("x"))
        # Rows 0-3 on host 0's device, 4-7 on host 1's: replicated, each
        # device gets the other's half from the other worker.
        np.testing.assert_array_equal(np.asarray(causeway.reshard(a, two, P())), value)
        # Sharded by columns: each half of each row block crosses too.
        np.testing.assert_array_equal(np.asarray(causeway.reshard(a, two, P(None, "x"))),
                                      value)
        total = causeway.jit(lambda x: jnp.sum(x, axis=0), devices=two,
                             in_shardings=P("x"), out_shardings=P())(a)
        np.testing.assert_array_equal(np.asarray(total), value.sum(axis=0))
    finally:
        causeway.disconnect()


def test_a_client_does_not_send_its_token_in_clear_to_an_exposed_head(token_file):
    # 192.0.2.1 (TEST-NET-1) is never dialled: the refusal comes first.
    with pytest.raises(causeway.errors.FailedPreconditionError, match="in clear text"):
        causeway.connect("192.0.2.1:7070", token_file=token_file, connect_timeout=1)
    # Told to, it dials (and finds nothing there).
    with pytest.raises(causeway.errors.UnavailableError):
        causeway.connect("192.0.2.1:7070", token_file=token_file, connect_timeout=1,
                         insecure=True)
    # Nor does a worker registering with one: it ends at once, saying why.
    from conftest import CAUSEWAY
    import subprocess
    refused = subprocess.run([CAUSEWAY, "worker", "--head", "192.0.2.1:7070", "--island", "0",
                              "--devices", "1", "--token-file", token_file],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert "in clear text" in refused.stderr and "--insecure" in refused.stderr


def test_a_head_exposed_without_protection_refuses_to_start(token_file):
    from conftest import CAUSEWAY
    import subprocess

    refused = subprocess.run([CAUSEWAY, "head", "--listen", "0.0.0.0:0"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert "reachable from other machines" in refused.stderr
    assert "--insecure" in refused.stderr
    refused = subprocess.run([CAUSEWAY, "proxy", "--head", "127.0.0.1:1",
                              "--listen", "0.0.0.0:0"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert "--insecure" in refused.stderr
    # The head's HTTP port and a worker's data plane: the same rule.
    refused = subprocess.run([CAUSEWAY, "head", "--http-listen", "0.0.0.0:0"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert "--http-listen 0.0.0.0:0 is reachable from other machines" in refused.stderr
    refused = subprocess.run([CAUSEWAY, "worker", "--head", "127.0.0.1:1", "--island", "0",
                              "--devices", "1", "--data-plane-listen", "192.0.2.7:0"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert "--data-plane-listen 192.0.2.7:0 is reachable from other machines" in refused.stderr
    assert "--token-file" in refused.stderr
    # A token alone (no TLS) would leave the session keys and the data in
    # clear text on the network: refused too, saying so.
    refused = subprocess.run([CAUSEWAY, "head", "--listen", "0.0.0.0:0",
                              "--token-file", token_file],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert "clear text" in refused.stderr
    assert "--tls-cert" in refused.stderr
    # Told --insecure, it starts (and is stopped at once).
    with ProcessCluster("--listen", "0.0.0.0:0", "--token-file", token_file, "--insecure",
                        command="head") as head:
        assert head.address


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """A CA and certificates for 127.0.0.1 signed by it, made with openssl:
    {"ca": path, "cluster": (cert, key), "alice": (cert, key)}."""
    import subprocess

    tmp_path = tmp_path_factory.mktemp("certificates")

    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    ca, ca_key = str(tmp_path / "ca.pem"), str(tmp_path / "ca.key")
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=ca",
        "-keyout", ca_key, "-out", ca)
    ext = tmp_path / "member.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")

    def member(name):
        key, csr, cert = (str(tmp_path / f"{name}.{s}") for s in ("key", "csr", "pem"))
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
            "-keyout", key, "-out", csr)
        run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
            "-days", "1", "-extfile", str(ext), "-out", cert)
        return cert, key

    return {"ca": ca, "cluster": member("cluster"), "alice": member("alice")}


@pytest.fixture(scope="module")
def mutual_tls(certificates, token_file):
    """A cluster of one island of two one-device workers with mutual TLS and
    a token, and its HTTP endpoint: (cluster, http address)."""
    cert, key = certificates["cluster"]
    cluster = ProcessCluster("--islands", 1, "--hosts-per-island", 2, "--devices-per-host", 1,
                             "--token-file", token_file, "--tls-cert", cert, "--tls-key", key,
                             "--tls-ca", certificates["ca"], "--http-listen", "127.0.0.1:0")
    try:
        http = cluster.line_starting_with(HTTP_LINE)[len(HTTP_LINE):].strip()
        yield cluster, http
    finally:
        cluster.stop()


def test_a_cluster_with_mutual_tls_serves_its_members_only(mutual_tls, certificates,
                                                           token_file):
    """`causeway cluster` passes the TLS flags to its head and workers: the
    workers join over mutual TLS with the cluster's certificate, a client
    with a certificate of the CA is served, one without is told at once."""
    cluster, _ = mutual_tls
    ca = certificates["ca"]
    alice_cert, alice_key = certificates["alice"]
    client = causeway.connect(cluster.address, token_file=token_file, tls_ca_file=ca,
                              tls_cert_file=alice_cert, tls_key_file=alice_key,
                              connect_timeout=60)
    try:
        assert len(client.devices()) == 2
        s = causeway.make_virtual_device_set().add_slice(devices=2, island=0)
        out = causeway.jit(lambda x: x * 3, devices=s)(np.ones(4, np.float32))
        np.testing.assert_array_equal(np.asarray(out), np.full(4, 3.0))
    finally:
        causeway.disconnect()
    with pytest.raises(causeway.UnauthenticatedError, match="client certificate"):
        causeway.connect(cluster.address, token_file=token_file, tls_ca_file=ca,
                         connect_timeout=60)


def test_the_http_endpoint_of_a_tls_head_serves_https_to_members_only(mutual_tls, certificates,
                                                                      token_file):
    """The head's HTTP endpoint takes the head's TLS settings: HTTPS only (the
    bearer token never crosses in clear text), and with --tls-ca a client
    certificate of the CA is required before any request is read."""
    import ssl
    import subprocess
    from conftest import CAUSEWAY

    _, http = mutual_tls
    ca = certificates["ca"]
    alice_cert, alice_key = certificates["alice"]
    request = urllib.request.Request(f"https://{http}/api/status",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
    member = ssl.create_default_context(cafile=ca)
    member.load_cert_chain(alice_cert, alice_key)
    with urllib.request.urlopen(request, context=member, timeout=30) as answer:
        assert answer.status == 200
        assert b"devices" in answer.read()
    # Plain HTTP: the TLS server reads no request (the connection ends).
    with pytest.raises((urllib.error.URLError, ConnectionError, HTTPException)):
        urllib.request.urlopen(f"http://{http}/api/status", timeout=30)
    # HTTPS without a client certificate: the handshake is refused.
    stranger = ssl.create_default_context(cafile=ca)
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError, HTTPException)):
        urllib.request.urlopen(request, context=stranger, timeout=30).read()
    # `causeway top` takes the same flags.
    top = subprocess.run([CAUSEWAY, "top", "--once", "--head", http, "--token-file", token_file,
                          "--tls-ca", ca, "--tls-cert", alice_cert, "--tls-key", alice_key],
                         capture_output=True, text=True, timeout=60)
    assert top.returncode == 0, top.stderr
    refused = subprocess.run([CAUSEWAY, "top", "--once", "--head", http,
                              "--token-file", token_file],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0


def test_a_slice_larger_than_the_cluster_is_refused_at_once(guarded, token_file):
    """`causeway cluster` tells its head what the cluster will be (--islands,
    --max-island-devices): a slice no island of it can hold fails at once,
    naming both sizes, instead of waiting for hosts that never come; the
    cluster goes on serving."""
    cluster, _, _ = guarded
    causeway.connect(cluster.address, token_file=token_file, connect_timeout=60)
    try:
        devices = causeway.make_virtual_device_set()
        too_big = devices.add_slice(devices=3)
        with pytest.raises(causeway.ResourceExhaustedError,
                           match=r"a slice of 3 devices can never be granted: an island of "
                                 r"this cluster has at most 2 devices \(head flag "
                                 r"--max-island-devices"):
            too_big.ready(timeout=60)
        elsewhere = devices.add_slice(devices=1, island=1)
        with pytest.raises(causeway.InvalidArgumentError,
                           match=r"island 1 does not exist and never will"):
            elsewhere.ready(timeout=60)
        s = devices.add_slice(devices=2, island=0)
        out = causeway.jit(lambda x: x - 1, devices=s)(np.ones(4, np.float32))
        np.testing.assert_array_equal(np.asarray(out), np.zeros(4))
    finally:
        causeway.disconnect()
