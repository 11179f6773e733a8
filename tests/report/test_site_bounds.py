"""What one request to ``kraftwerk serve`` may cost the others: a run's zip is
streamed (no temporary file, no archive in memory), refused in one line
(413) over its size or file-count limit, made at most ``concurrent`` at a
time (503 with Retry-After beyond, the slot given back when a client goes
away mid-zip); and a request stuck on a slow read holds its worker thread,
never the event loop every other request is answered on."""

from __future__ import annotations

import http.client
import inspect
import io
import os
import re
import socket
import threading
import time
import zipfile
from pathlib import Path

import pytest

from harness.site import build_app
from tests.report.served import served
from harness.site.paths import servable
from harness.site.zipstream import MiB, ZipLimits, manifest, zip_chunks

LIMITS = ZipLimits(max_bytes=64 * MiB, max_files=50, concurrent=1)
BIG = 24 * MiB  # incompressible, more than the sockets between client and server buffer


def get(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def _run(root: Path, name: str) -> Path:
    d = root / "queue" / name
    d.mkdir(parents=True)
    (d / "results.json").write_text('{"valid": true}')
    os.chmod(d / "results.json", 0o644)
    return d


def _served_file(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    os.chmod(path, 0o644)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("results")
    _served_file(_run(root, "big") / "node.log", os.urandom(BIG))
    _served_file(_run(root, "small") / "history.jsonl", b'{"type":"invoke","f":"send","process":0}\n')
    huge = _run(root, "huge") / "node.log"
    with open(huge, "wb") as f:
        f.truncate(100 * MiB)  # sparse: over the limit by its size, no disk spent
    os.chmod(huge, 0o644)
    many = _run(root, "many")
    for i in range(60):
        _served_file(many / f"part-{i}.log", b"x\n")
    os.mkfifo(_run(root, "slow") / "index.html")  # a report whose read blocks until the test writes
    return root


@pytest.fixture(scope="module")
def port(results):
    with served(build_app(results, zip_limits=LIMITS)) as p:
        yield p


def _message(body: bytes) -> str:
    (m,) = re.findall(rb'<p id="message">(.*?)</p>', body, re.S)
    return m.decode()


def test_a_run_over_the_size_limit_is_refused_413_in_one_line(port):
    status, _, body = get(port, "/zip/queue/huge")
    assert status == 413
    msg = _message(body)
    assert "more than 64 MiB" in msg and "--zip-max-mib" in msg and "\n" not in msg


def test_a_run_over_the_file_count_limit_is_refused_413(port):
    status, _, body = get(port, "/zip/queue/many")
    assert status == 413 and "more than 50 files" in _message(body)


def test_a_head_of_a_zip_makes_no_zip(port):
    status, headers, body = get(port, "/zip/queue/big", "HEAD")
    assert status == 200 and headers["content-type"] == "application/zip" and body == b""
    assert get(port, "/zip/queue/small")[0] == 200  # its slot was given back at once


def test_a_zip_is_streamed_whole_and_correct(port, results):
    status, headers, body = get(port, "/zip/queue/big")
    assert status == 200 and "content-length" not in headers  # sent as made, never sized first
    assert headers["content-disposition"] == "attachment; filename*=utf-8''queue-big.zip"
    z = zipfile.ZipFile(io.BytesIO(body))
    assert z.testzip() is None
    assert z.read("queue-big/node.log") == (results / "queue" / "big" / "node.log").read_bytes()


def test_zips_beyond_the_limit_are_refused_503_and_a_client_gone_gives_its_slot_back(port):
    c = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        c.sendall(b"GET /zip/queue/big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            head += c.recv(4096)
        assert head.startswith(b"HTTP/1.1 200")  # under way; this client now stops reading
        status, headers, body = get(port, "/zip/queue/small")
        assert status == 503 and headers["retry-after"] == "5" and "zips are being made" in _message(body)
    finally:
        c.close()  # gone mid-zip
    deadline = time.monotonic() + 30
    while (status := get(port, "/zip/queue/small")[0]) == 503 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert status == 200


def test_a_slow_read_in_one_request_does_not_stall_the_others(port, results):
    fifo = results / "queue" / "slow" / "index.html"
    answer: dict[str, int] = {}
    t = threading.Thread(target=lambda: answer.update(status=get(port, "/r/queue/slow/")[0]), daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while True:  # opens once the request's handler is inside its read of the report
        try:
            w = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            assert time.monotonic() < deadline, "the request never read the report"
            time.sleep(0.05)
    try:
        assert get(port, "/")[0] == 200  # answered while the other request waits on its read
        assert get(port, "/zip/queue/small")[0] == 200
        assert "status" not in answer
    finally:
        os.close(w)  # end of file: the stuck read returns
    t.join(timeout=30)
    assert answer["status"] == 200


def test_every_endpoint_runs_in_a_worker_thread(results):
    app = build_app(results)
    endpoints = [r.endpoint for r in app.routes]
    assert len(endpoints) >= 8
    assert not [e for e in endpoints if inspect.iscoroutinefunction(e)]


def test_a_file_growing_while_zipped_is_cut_at_the_size_counted(tmp_path):
    run = tmp_path / "q" / "r1"
    run.mkdir(parents=True)
    log = run / "node.log"
    _served_file(log, b"a" * 1000)
    assert servable(log)
    entries = manifest(tmp_path.resolve(), run.resolve(), ZipLimits())
    with open(log, "ab") as f:
        f.write(b"b" * 5000)  # the run goes on writing
    z = zipfile.ZipFile(io.BytesIO(b"".join(zip_chunks(entries))))
    assert z.read("q-r1/node.log") == b"a" * 1000


def test_a_zip_is_made_piece_by_piece_never_whole_in_memory(tmp_path):
    run = tmp_path / "q" / "r1"
    run.mkdir(parents=True)
    _served_file(run / "node.log", os.urandom(3 * MiB))
    sizes = [len(c) for c in zip_chunks(manifest(tmp_path.resolve(), run.resolve(), ZipLimits()))]
    assert len(sizes) > 4 and max(sizes) < MiB
