"""The Spark engine's files (package zip, log4j2 settings, JVM log) live in a
directory this process made (mkdtemp, 0700): files another local user planted
in the shared temp directory under the old predictable names are never used,
and a planted symlink is never followed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_package_zip_is_private_and_never_reused(tmp_path, monkeypatch):
    import tempfile

    from checkers import pipeline

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(pipeline, "_private", None)
    planted = tmp_path / "kraftwerk-checkers-planted.zip"
    planted.write_bytes(b"planted")
    z = Path(pipeline._package_zip())
    assert z.parent.parent == tmp_path and z.parent.name.startswith("kraftwerk-spark-")
    assert stat.S_IMODE(z.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(z.stat().st_mode) == 0o600
    assert Path(pipeline._package_zip()) != z  # never reused, even our own


@pytest.mark.spark
def test_spark_start_ignores_planted_log4j_and_log_symlink(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    script = textwrap.dedent(f"""
        import os, tempfile
        from pathlib import Path
        tmp = Path({str(tmp_path)!r})
        (tmp / "kraftwerk-spark-log4j2.properties").write_text("rootLogger.level = all\\n")
        os.symlink({str(victim)!r}, tmp / f"kraftwerk-spark-{{os.getpid()}}.log")
        from checkers.pipeline import get_spark, _private_dir
        s = get_spark("local[1]")
        conf = s.sparkContext.getConf().get("spark.driver.extraJavaOptions")
        print(conf)
        print(_private_dir())
    """)
    env = {**os.environ, "TMPDIR": str(tmp_path), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    conf, private = r.stdout.strip().splitlines()[-2:]
    assert "kraftwerk-spark-log4j2.properties" not in conf and private in conf
    assert victim.read_text() == "untouched\n"
    assert not Path(private).exists()  # removed at exit
