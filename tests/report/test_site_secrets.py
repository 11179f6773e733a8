"""``kraftwerk serve`` hands out what a reader of results needs and nothing
else (harness/site/paths.py ``servable``: an allow-list, of files anyone
here could read anyway): a run's cluster secret, a key, a file its owner
closed to others are 404, left out of listings and out of the zip; a bind
other machines can reach needs ``--allow-non-loopback`` and warns; requests
naming a host the site is not bound to are refused (DNS rebinding)."""

from __future__ import annotations

import http.client
import io
import os
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from harness.report.render import VERSION_MARK
from harness.site import build_app
from harness.site.app import allowed_hosts
from reference_impl.server.ports import free_ports
from tests.report.served import served

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]
SECRET = b"7f3a-the-cluster-secret-bytes"
RUN = "queue/20260101T000000-1"


def get(port: int, path: str, host: str = "127.0.0.1") -> tuple[int, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path, headers={"Host": host})
    r = c.getresponse()
    return r.status, r.read()


def _file(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.chmod(path, mode)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    run = root / RUN
    _file(run / "history.jsonl", b'{"type":"invoke","f":"send","process":0,"time":1,"index":0}\n', 0o644)
    _file(run / "results.json", b'{"valid": true}', 0o644)
    _file(run / "test.json", b'{"name": "queue"}', 0o644)
    _file(run / "index.html", f"<html><head>{VERSION_MARK}</head><body>report</body></html>".encode(), 0o644)
    os.utime(run / "results.json", (1, 1))
    _file(run / "nodes" / "cluster.secret", SECRET, 0o600)
    _file(run / "nodes" / "n1" / "node.log", b"started\n", 0o644)
    _file(run / "nodes" / "n1" / "t0-0" / "00000000000000000000.log", b"\0segment", 0o644)
    _file(run / "nodes" / "n1" / "t0-0" / "leader-epoch-checkpoint", b"0\n", 0o644)
    _file(run / "nodes" / "n1" / "private.log", SECRET, 0o600)
    _file(run / "nodes" / "id_ed25519", SECRET, 0o644)  # readable, but no reader of results needs it
    _file(run / "nodes" / "readable.secret", SECRET, 0o644)
    with served(build_app(root)) as port:
        yield port


@pytest.mark.parametrize("rel", ["nodes/cluster.secret", "nodes/n1/private.log", "nodes/id_ed25519",
                                 "nodes/readable.secret"])
def test_a_secret_or_a_file_no_reader_needs_is_not_served(site, rel):
    status, body = get(site, f"/r/{RUN}/{rel}")
    assert status == 404 and SECRET not in body


@pytest.mark.parametrize("rel", ["history.jsonl", "results.json", "nodes/n1/node.log",
                                 "nodes/n1/t0-0/00000000000000000000.log", "nodes/n1/t0-0/leader-epoch-checkpoint"])
def test_what_a_reader_needs_is_served(site, rel):
    assert get(site, f"/r/{RUN}/{rel}")[0] == 200


def test_the_zip_holds_what_a_reader_needs_and_no_secret(site):
    status, body = get(site, f"/zip/{RUN}")
    assert status == 200
    z = zipfile.ZipFile(io.BytesIO(body))
    names = {n.split("/", 1)[1] for n in z.namelist()}
    assert {"history.jsonl", "results.json", "nodes/n1/node.log", "nodes/n1/t0-0/leader-epoch-checkpoint"} <= names
    assert not names & {"nodes/cluster.secret", "nodes/n1/private.log", "nodes/id_ed25519", "nodes/readable.secret"}
    assert not any(SECRET in z.read(n) for n in z.namelist())


def test_a_listing_does_not_name_what_is_not_served(site):
    status, body = get(site, f"/ls/{RUN}/nodes/")
    assert status == 200 and b"n1/" in body
    assert b"cluster.secret" not in body and b"id_ed25519" not in body


def test_a_host_the_site_is_not_bound_to_is_refused(site):
    assert get(site, "/", host="127.0.0.1")[0] == 200
    assert get(site, "/", host="rebound.attacker.example")[0] == 400


def test_a_wildcard_bind_answers_this_machines_names_and_addresses_only():
    names = allowed_hosts("0.0.0.0", ["0.0.0.0"], ["kw.example.org"])
    assert "*" not in names and "attacker.example" not in names
    assert {"127.0.0.1", "localhost", socket.gethostname().lower(), "kw.example.org"} <= set(names)
    assert "127.0.0.1" in allowed_hosts("127.0.0.1", ["127.0.0.1"]) and "*" not in allowed_hosts("127.0.0.1", [])


def test_a_non_loopback_bind_needs_the_flag_and_warns(tmp_path):
    r = subprocess.run(CLI + ["serve", "--out", str(tmp_path), "--host", "0.0.0.0", "--port", "0"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and "--allow-non-loopback" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    port = free_ports(1)[0]
    p = subprocess.Popen(CLI + ["serve", "--out", str(tmp_path), "--host", "0.0.0.0", "--port", str(port),
                                "--allow-non-loopback"], stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert "warning: serving on 0.0.0.0" in p.stderr.readline()
        deadline = time.monotonic() + 30
        while True:
            try:
                assert get(port, "/", host="attacker.example")[0] == 400
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert get(port, "/", host=f"127.0.0.1:{port}")[0] == 200
    finally:
        p.terminate()
        p.wait(timeout=30)
