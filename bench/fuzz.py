"""Coverage-guided fuzzing (atheris, libFuzzer) of every parser that reads
untrusted bytes: the broker's request decoding over every API it answers
(decode, translate to core messages, and encode the answer it would give),
its record-batch splitter, the internal-RPC codec (a hello is decoded before
it is authenticated), the JSONL and EDN history readers and the YAML config.

Each target runs in its own process for ``--seconds`` and prints the inputs it
tried and the crashes it found: an exception other than the parser's
documented refusal (ProtocolError/UnsupportedVersion, InvalidBatch,
CodecError, HistoryError, UsageError). Crashing inputs are kept under
``--crashes DIR`` (one file each) to become regression tests.

    .venv/bin/pip install -e '.[fuzz]'      # atheris
    .venv/bin/python bench/fuzz.py [--targets wire,records,rpc,jsonl,edn,yaml] [--seconds 60]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TARGETS = ("wire", "records", "rpc", "jsonl", "edn", "yaml")


# -- seeds ---------------------------------------------------------------------

def wire_seeds() -> list[bytes]:
    """One valid request per API and version the broker answers."""
    from reference_impl.server.wire import APIS

    out = []
    for key, (req_cls, _, lo, hi) in sorted(APIS.items()):
        for v in range(lo, hi + 1):
            try:
                req = _example(req_cls[v])
                req.with_header(correlation_id=7, client_id="fuzz")
                out.append(bytes(req.encode(header=True)))
            except Exception:
                continue  # a version whose example needs fields we do not fill
    return out


def _example(cls):
    """A request of ``cls`` with every field at a plausible value."""
    kw = {}
    for f in cls.fields.values() if isinstance(getattr(cls, "fields", None), dict) else []:
        kw[f.name] = _value(f)
    return cls(**kw)


def _value(f):
    t = type(f).__name__.lower()
    name = getattr(f, "name", "")
    if "array" in t or getattr(f, "is_array", False):
        inner = getattr(f, "array_of", None) or getattr(f, "element", None)
        if inner is not None and hasattr(inner, "fields"):
            return [_example(inner)]
        return []
    if "string" in t:
        return "fuzz" if "name" in name or "topic" in name else None if "transactional" in name else "x"
    if "bool" in t:
        return False
    if "bytes" in t or "records" in t:
        return b""
    if "uuid" in t:
        import uuid

        return uuid.UUID(int=0)
    return -1 if "epoch" in name or "replica" in name else 0


def rpc_seeds() -> list[bytes]:
    from reference_impl.core import messages as m
    from reference_impl.server.codec import REGISTRY

    return [REGISTRY.dumps((1, "127.0.0.1", 9092, "0" * 64)),
            REGISTRY.dumps((2, m.VoteRequest(2, 5, 4, 100))),
            REGISTRY.dumps((3, m.MetadataRequest(None, ("t",))))]


def records_seeds() -> list[bytes]:
    from kafka.record import MemoryRecordsBuilder

    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 16)
    for i in range(3):
        b.append(timestamp=1, key=None, value=b"v%d" % i, headers=[])
    b.close()
    return [bytes(b.buffer())]


def history_seeds(kind: str) -> list[bytes]:
    if kind == "jsonl":
        return [b'{"index":0,"time":1,"process":0,"type":"invoke","f":"send","value":[["send","t-0",1]]}\n'
                b'{"index":1,"time":2,"process":0,"type":"ok","f":"send","value":[["send","t-0",[0,1]]],"acks":"all"}\n']
    if kind == "edn":
        return [b'{:type :invoke, :f :read, :process 0, :time 1, :value nil}\n'
                b'{:type :ok, :f :read, :process 0, :time 2, :value [1 2/3 "s" #{:a} {:k 1.5}]}\n']
    return [b"name: fuzz\nbrokers: 3\nnemesis: [partition, kill]\nvariants:\n  kip966: on\ntime_limit: 5\n"]


# -- targets -------------------------------------------------------------------

def make_target(name: str, workdir: Path):
    """(one-input function, allowed exception types)."""
    if name == "wire":
        from reference_impl.server import wire

        def one(data: bytes) -> None:
            try:
                d = wire.decode_request(data)
            except wire.UnsupportedVersion as e:
                wire.unsupported_version_response(e)
                return
            p = wire.translate(d, lambda i: i)
            p.expire()  # every part answered REQUEST_TIMED_OUT where the API can say so
            if p.done and p.expects_response and p.build is not None:
                p.encode()
        return one, (wire.ProtocolError,)
    if name == "records":
        from reference_impl.server.records import InvalidBatch, rewrite, scan, split_batches

        def one(data: bytes) -> None:
            scan(data)
            for h, payload in split_batches(data):
                rewrite(payload, 5, 3)
        return one, (InvalidBatch,)
    if name == "rpc":
        from reference_impl.server.codec import REGISTRY, CodecError

        return (lambda data: REGISTRY.loads(data)), (CodecError,)
    if name in ("jsonl", "edn"):
        from checkers.history.edn import read_edn
        from checkers.history.jsonl import read_jsonl
        from checkers.history.op import HistoryError

        path = workdir / f"h.{name}"
        reader = read_jsonl if name == "jsonl" else read_edn

        def one(data: bytes) -> None:
            path.write_bytes(data)
            reader(path)
        return one, (HistoryError,)
    if name == "yaml":
        from harness.config import build_config, load_yaml
        from harness.errors import UsageError

        path = workdir / "c.yaml"

        def one(data: bytes) -> None:
            path.write_bytes(data)
            build_config(load_yaml(path), {})
        return one, (UsageError,)
    raise SystemExit(f"unknown target {name}")


def child(name: str, seconds: float, crashes: Path, stats: Path) -> None:
    import atheris

    with tempfile.TemporaryDirectory(prefix="kw-fuzz-") as d:
        work = Path(d)
        corpus = work / "corpus"
        corpus.mkdir()
        seeds = {"wire": wire_seeds, "rpc": rpc_seeds, "records": records_seeds}.get(name, lambda: history_seeds(name))()
        for s in seeds:
            (corpus / hashlib.sha1(s).hexdigest()).write_bytes(s)
        one, allowed = make_target(name, work)
        atheris.instrument_all()  # the seeds imported the parsers already: instrument what is loaded
        counts = {"inputs": 0, "crashes": 0, "kinds": {}}

        def test_one(data: bytes) -> None:
            counts["inputs"] += 1
            try:
                one(data)
            except allowed:
                pass
            except (MemoryError, RecursionError, Exception) as e:  # a crash: keep it, carry on
                # one kind per exception type and place: the message varies with the input
                ours = [f for f in traceback.extract_tb(e.__traceback__) if str(ROOT) in f.filename] or \
                    traceback.extract_tb(e.__traceback__)
                where = ours[-1]
                kind = f"{type(e).__name__} at {Path(where.filename).name}:{where.lineno} ({str(e)[:60]})"
                if any(k.startswith(kind.split(" (")[0]) for k in counts["kinds"]):
                    kind = next(k for k in counts["kinds"] if k.startswith(kind.split(" (")[0]))
                if kind not in counts["kinds"]:
                    counts["kinds"][kind] = 0
                    crashes.mkdir(parents=True, exist_ok=True)
                    (crashes / f"{name}-{hashlib.sha1(data).hexdigest()[:12]}").write_bytes(data)
                counts["kinds"][kind] += 1
                counts["crashes"] += 1
            if counts["inputs"] % 2000 == 0:
                stats.write_text(json.dumps(counts))

        atheris.Setup([sys.argv[0], str(corpus), f"-max_total_time={int(seconds)}", "-rss_limit_mb=4096",
                       "-max_len=4096", "-print_final_stats=1"], test_one)
        try:
            atheris.Fuzz()
        finally:
            stats.write_text(json.dumps(counts))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--crashes", default=str(ROOT / "bench" / "fuzz-crashes"))
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--stats", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.seconds, Path(a.crashes), Path(a.stats))
        return 0
    names = [t.strip() for t in a.targets.split(",") if t.strip()]
    bad = [t for t in names if t not in TARGETS]
    if bad or a.seconds <= 0:
        print(f"fuzz: unknown target {bad[0]!r} (choose from {', '.join(TARGETS)})" if bad
              else "fuzz: --seconds must be positive", file=sys.stderr)
        return 2
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("fuzz: atheris is not installed (pip install -e '.[fuzz]')", file=sys.stderr)
        return 2
    total = 0
    for t in names:
        with tempfile.NamedTemporaryFile(suffix=".json") as st:
            r = subprocess.run([sys.executable, __file__, "--child", t, "--seconds", str(a.seconds), "--crashes",
                                a.crashes, "--stats", st.name], cwd=ROOT, capture_output=True, text=True,
                               timeout=a.seconds + 300)
            try:
                counts = json.loads(Path(st.name).read_text() or "{}")
            except ValueError:
                counts = {}
        runs = re.findall(r"Done (\d+) runs", r.stderr)
        cov = re.findall(r"cov: (\d+)", r.stderr)
        print(f"{t:8s} inputs tried: {counts.get('inputs', runs[-1] if runs else '?')}  "
              f"coverage (edges): {cov[-1] if cov else '?'}  crashes: {counts.get('crashes', '?')}"
              + ("" if r.returncode == 0 else f"  (fuzzer exit {r.returncode}: {r.stderr.strip().splitlines()[-1:]})"),
              flush=True)
        for kind, n in sorted(counts.get("kinds", {}).items()):
            print(f"         {n:7d} x {kind}")
        total += counts.get("crashes", 0) or 0
    print(f"total crashes: {total}" + (f" (inputs kept in {a.crashes})" if total else ""))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
