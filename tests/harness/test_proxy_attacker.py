"""The link proxy's control port is on loopback, where every local user can
reach it: so the proxy never starts without the run's secret, and another
user, who cannot read that 0600 file, cannot cut, heal, delay or even ask
for stats; each try is answered with one refusal line and changes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.runtimes.local import allocate_ports
from harness.runtimes.proxy import ProxyControl
from reference_impl.server import auth
from tests.nobody import need_root, public_dir, run_as_nobody  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]

#: the attacker's side: read the secret if it can, then send every command it
#: might, with every token it could make up, one line each; print the answers
ATTACK = r"""
import hashlib, hmac, json, socket, sys
port, secret_path = int(sys.argv[1]), sys.argv[2]
try:
    open(secret_path, "rb").read()
    read = True
except OSError:
    read = False
guess = hmac.new(b"0" * 64, b"kraftwerk-proxy/1", hashlib.sha256).hexdigest()
tokens = [None, "", "x", guess, ["list"], {"a": 1}, 0]
cmds = [{"cmd": "cut", "pairs": [["a", "b"], ["b", "a"]]}, {"cmd": "delay", "ms": 1000}, {"cmd": "heal"},
        {"cmd": "stats"}]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
f = s.makefile("rwb")
answers = []
for c in cmds:
    for t in tokens:
        req = dict(c) if t is None else {**c, "token": t}
        f.write((json.dumps(req) + "\n").encode())
        f.flush()
        answers.append(f.readline().decode())
f.write(b"not json\n")
f.flush()
answers.append(f.readline().decode())
print(json.dumps({"read_secret": read, "answers": answers}))
"""


def _start(tmp_path: Path, *extra: str) -> subprocess.Popen:
    la, ctl = allocate_ports(2)
    links = tmp_path / "links.json"
    links.write_text(json.dumps([{"src": "a", "dst": "b", "listen": la, "target": 1}]))
    os.chmod(links, 0o644)
    return subprocess.Popen([sys.executable, "-m", "harness.runtimes.proxy", "--links", str(links),
                             "--control-port", str(ctl), *extra], stdout=subprocess.PIPE, text=True, cwd=ROOT)


def _refusal(run_dir, *extra: str) -> tuple[int, str]:
    """Start the proxy expecting a refusal: its exit code and its one error line."""
    p = _start(run_dir, *extra)
    try:
        out, _ = p.communicate(timeout=60)
    finally:
        p.kill()
    (line,) = out.strip().splitlines()
    return p.returncode, json.loads(line)["error"]


def test_the_proxy_refuses_to_start_without_the_run_secret(tmp_path):
    code, error = _refusal(tmp_path)
    assert code == 2
    assert "--secret-file is required" in error


def test_a_secret_others_can_read_is_refused_at_start(tmp_path):
    secret = auth.make_secret_file(str(tmp_path / "cluster.secret"))
    os.chmod(secret, 0o644)
    code, error = _refusal(tmp_path, "--secret-file", secret)
    assert code == 2
    assert "mode 0600" in error


def test_another_local_user_can_neither_read_the_secret_nor_control_the_links(public_dir):
    need_root()
    run = public_dir / "run"  # a run directory others may enter and list, as results are
    run.mkdir(mode=0o755)
    secret = auth.make_secret_file(str(run / "cluster.secret"))
    p = _start(run, "--secret-file", secret)
    ours = None
    try:
        port = json.loads(p.stdout.readline())["control"]
        ours = ProxyControl(port, secret=auth.load_secret(secret))
        r = run_as_nobody([sys.executable, "-I", "-c", ATTACK, str(port), secret])
        got = json.loads(r.stdout)
        assert got["read_secret"] is False
        assert len(got["answers"]) == 4 * 7 + 1
        for line in got["answers"][:-1]:
            assert json.loads(line) == {"ok": False, "error": "missing or wrong cluster token"}
        assert json.loads(got["answers"][-1])["ok"] is False
        stats = ours.call(cmd="stats")
        assert stats["cut"] == [] and stats["delay"] == {}
        assert ours.call(cmd="cut", pairs=[["a", "b"]])["cut"] == [["a", "b"]]  # the owner still can
    finally:
        if ours is not None:
            ours.close()
        p.kill()
        p.wait()
        p.stdout.close()
