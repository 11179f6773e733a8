"""Getting Apache Kafka: the jars a KRaft node needs, from Maven Central.

``harness/dbs/kafka/pom.xml`` names ``org.apache.kafka:kafka_2.13`` (pinned, 4.4.0
by default) and the logging backend; ``mvn dependency:copy-dependencies``
resolves them once into a cache outside the repository,
``$KRAFTWERK_CACHE`` (default ``~/.cache/kraftwerk``) ``/kafka/<version>/libs``,
which every later run reuses. ``--kafka-version`` picks another release
(its own cache directory); ``--kafka-home DIR`` uses a binary distribution a
user already has (its ``libs/``), and nothing is fetched.

A fetch writes into a temporary directory and renames it into place, under
a lock, so two runs starting at once never see half a directory.

A version outside the release table (:mod:`.releases`: not MAJOR.MINOR.PATCH,
or a minor other than 3.3 .. 4.4) is refused before Maven is asked; a patch
the table does not list is asked for, and Maven's "not found" is refused the
same way (exit 2). Either leaves nothing in the cache: a fetch that fails
removes the version's directory and any cache directory it made.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.dbs.kafka import releases
from harness.errors import HarnessError, UsageError

DEFAULT_VERSION = "4.4.0"
POM = Path(__file__).with_name("pom.xml")
LOG4J = Path(__file__).with_name("log4j2.properties")
_SERVER_JAR = re.compile(r"^kafka_2\.1[23]-(.+)\.jar$")
#: Maven's words for an artifact Central does not have (first try, then cached)
_NOT_FOUND = re.compile(r"Could not find artifact org\.apache\.kafka:kafka[-_.\w]*:jar:(\S+)"
                        r"|org\.apache\.kafka:kafka[-_.\w]*:jar:(\S+) was not found")


@dataclass(frozen=True)
class KafkaDist:
    """A usable Kafka: the directory of its jars and the version they are."""

    libs: Path
    version: str

    def classpath(self) -> str:
        return str(self.libs / "*")


def cache_root() -> Path:
    return Path(os.environ.get("KRAFTWERK_CACHE") or Path.home() / ".cache" / "kraftwerk")


def check_version(version: str) -> str:
    """``version`` if the release table knows its minor (:func:`releases.release_for`)."""
    releases.release_for(version)
    return version


def jar_version(libs: Path) -> str | None:
    """The version in the name of the server jar (``kafka_2.13-<v>.jar``)."""
    for p in sorted(libs.glob("kafka_2.1*.jar")):
        m = _SERVER_JAR.match(p.name)
        if m and not m.group(1).endswith(("-sources", "-javadoc", "-test")):
            return m.group(1)
    return None


def from_home(home: str | Path) -> KafkaDist:
    """A binary distribution a user already has: ``DIR/libs/kafka_2.13-*.jar``."""
    libs = Path(home) / "libs"
    version = jar_version(libs) if libs.is_dir() else None
    if version is None:
        raise UsageError(f"--kafka-home {home}: no libs/kafka_2.13-*.jar there (not a Kafka binary distribution)")
    releases.release_for(version, home=True)
    return KafkaDist(libs, version)


def cached(version: str) -> KafkaDist | None:
    libs = cache_root() / "kafka" / version / "libs"
    return KafkaDist(libs, version) if jar_version(libs) == version else None


def ensure(version: str = DEFAULT_VERSION, home: str | Path | None = None, quiet: bool = True) -> KafkaDist:
    """The Kafka to run: ``home`` if given, else the cached release, fetched
    with Maven on first use."""
    if home:
        return from_home(home)
    version = check_version(version)
    hit = cached(version)
    if hit is not None:
        return hit
    if shutil.which("mvn") is None:
        raise HarnessError("Kafka is not cached and mvn is not installed (scripts/bootstrap installs maven)")
    base = cache_root() / "kafka" / version
    made = [d for d in (base, base.parent, base.parent.parent) if not d.exists()]
    base.mkdir(parents=True, exist_ok=True)
    try:
        with open(base / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            hit = cached(version)  # another run fetched it while we waited
            if hit is not None:
                return hit
            _fetch(version, base, quiet)
    except (UsageError, HarnessError):
        _remove_empty(base, made)
        raise
    hit = cached(version)
    if hit is None:
        raise HarnessError(f"Kafka {version}: Maven resolved no kafka_2.13-{version}.jar")
    return hit


def _fetch(version: str, base: Path, quiet: bool) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="libs.", dir=base))
    argv = ["mvn", "-B", "-f", str(POM), f"-Dkafka.version={version}",
            "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={tmp}"]
    if quiet:
        argv.insert(1, "-q")
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, cwd=str(base))
    except subprocess.TimeoutExpired:
        shutil.rmtree(tmp, ignore_errors=True)
        raise HarnessError(f"Kafka {version}: Maven did not finish within 900 s") from None
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise maven_error(version, proc.stdout + proc.stderr, proc.returncode)
    final = base / "libs"
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)


def maven_error(version: str, output: str, code: int) -> Exception:
    """One line for a failed fetch: a release Central does not have is the
    user's (UsageError, exit 2); anything else, Maven's first error line
    with the goal's boilerplate cut off (HarnessError, exit 4)."""
    text = output.replace("\x1b[0m", "").replace("\x1b[1m", "")
    if _NOT_FOUND.search(text):
        return UsageError(f"--kafka-version {version}: Kafka {version} is not on Maven Central "
                          f"(releases kraftwerk knows: {releases.known_range()})")
    lines = [ln.strip() for ln in text.splitlines() if "ERROR" in ln and ln.strip() != "[ERROR]"]
    first = lines[0] if lines else f"exit {code}"
    first = re.sub(r"^\[ERROR\]\s*(Failed to execute goal[^:]*:\s*)?", "", first)
    return HarnessError(f"Kafka {version}: Maven failed: {first[:400]}")


def _remove_empty(base: Path, made: list[Path]) -> None:
    """After a failed fetch: the version's directory unless a release landed
    there after all, then the cache directories this fetch made, if empty."""
    if jar_version(base / "libs") is None:
        shutil.rmtree(base, ignore_errors=True)
    for d in made[1:]:
        try:
            d.rmdir()
        except OSError:
            pass


def archive(kafka: KafkaDist) -> tuple[str, Path]:
    """(digest, path) of one tar of the jars (``libs/``) and the log4j
    config, for a host that does not share this machine's filesystem: made
    once per content in the cache (the digest covers names, sizes and the
    config's bytes; a release's jars never change under one name)."""
    jars = sorted(p for p in kafka.libs.iterdir() if p.is_file() and p.suffix == ".jar")
    h = hashlib.sha256(LOG4J.read_bytes())
    for p in jars:
        h.update(f"{p.name}\0{p.stat().st_size}\0".encode())
    digest = h.hexdigest()[:16]
    path = cache_root() / f"kw-kafka-{kafka.version}-{digest}.tar"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        with tarfile.open(tmp, "w") as tar:  # jars are zips already: no compression
            for p in jars:
                tar.add(p, arcname=f"libs/{p.name}")
            tar.add(LOG4J, arcname=LOG4J.name)
        os.replace(tmp, path)
    return digest, path
