"""``kraftwerk hosts up --dir DIR`` gives no other local user a way in
(harness/runtimes/throwaway.py): a DIR another user made first, or one they
can write, is refused before anything starts; the hosts' sshd runs with
StrictModes and reads the key it accepts from root's own directory, never
from DIR; a known_hosts symlink planted in DIR is replaced, not written
through; and nobody logs in as root with a key of their own."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.runtimes.net.netns import list_namespaces
from harness.runtimes.throwaway import authorized_keys, down, up
from tests.nobody import ATTACKER, NOBODY, public_dir, run_as_nobody  # noqa: F401 (fixture)

from .conftest import needs_root_net

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]


def test_a_dir_another_user_made_first_is_refused_before_anything_starts(public_dir):
    needs_root_net()
    d = public_dir / "kw-hosts"
    run_as_nobody(["mkdir", str(d)])
    before = set(list_namespaces())
    r = subprocess.run([*CLI, "hosts", "up", "--count", "1", "--dir", str(d)], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and f"owned by {ATTACKER}" in r.stderr
    # other tests' clusters may come and go meanwhile: no host namespace
    # (``kw-<tag>-h1``) of this command's fabric appeared, and the dir is empty
    assert not [n for n in set(list_namespaces()) - before if n.endswith("-h1")] and os.listdir(d) == []


def test_a_dir_others_can_write_is_refused(tmp_path):
    needs_root_net()
    os.chmod(tmp_path, 0o777)
    r = subprocess.run([*CLI, "hosts", "up", "--count", "1", "--dir", str(tmp_path)], capture_output=True,
                       text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and "others can write it" in r.stderr, r.stderr


def test_the_hosts_accept_only_roots_key_file_with_strict_modes_and_nobody_gets_in(public_dir, tmp_path):
    needs_root_net()
    d = public_dir / "hosts"  # under a sticky /tmp-like directory: ours, so accepted
    d.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    (d / "known_hosts").symlink_to(victim)  # as an attacker would have, were d theirs
    up(1, d)
    try:
        tag = json.loads((d / "fabric.json").read_text())["tag"]
        cfg = (d / "h1" / "sshd_config").read_text()
        keys = authorized_keys(tag)
        assert "StrictModes yes" in cfg and f"AuthorizedKeysFile {keys}" in cfg
        st = keys.stat()
        assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o600
        assert not keys.is_relative_to(d)
        assert victim.read_text() == "root's file\n" and not (d / "known_hosts").is_symlink()
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
        # the key up made gets in (StrictModes accepts the file) ...
        ok = subprocess.run(["ssh", "-i", str(d / "id_ed25519"), "-o", f"UserKnownHostsFile={d / 'known_hosts'}",
                             "-o", "BatchMode=yes", "root@10.213.%s.11" % _subnet(d), "id", "-u"],
                            capture_output=True, text=True, timeout=30)
        assert ok.stdout.strip() == "0", ok.stderr
        # ... and nobody can read it, or put a key of their own where sshd looks
        assert run_as_nobody(["cat", str(d / "id_ed25519")], check=False).returncode != 0
        assert run_as_nobody(["sh", "-c", f"echo x >> {keys}"], check=False).returncode != 0
        assert run_as_nobody(["sh", "-c", f"echo x > {d}/authorized_keys"], check=False).returncode != 0
    finally:
        down(d)
    assert not keys.exists() and not (d / "hosts.yaml").exists()


def _subnet(d: Path) -> str:
    import yaml

    addr = yaml.safe_load((d / "hosts.yaml").read_text())["hosts"][0]["address"]
    return addr.split(".")[2]
