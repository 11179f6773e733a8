"""The mypyc accelerator (reference_impl.accel): the compiled build is loaded
only when built from exactly the current sources, and a seed replays to the
same history compiled or not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reference_impl import accel

ROOT = Path(__file__).resolve().parents[2]


def _fake_build(tmp_path: Path, tag: str | None = None) -> tuple[Path, Path]:
    """A source tree with one module and a build dir whose manifest matches it."""
    root = tmp_path / "src"
    (root / "pkg").mkdir(parents=True)
    src = root / "pkg" / "mod.py"
    src.write_text("X = 1\n")
    build = tmp_path / "accel"
    (build / "lib" / "pkg").mkdir(parents=True)
    (build / "lib" / "pkg" / "mod.so").write_bytes(b"")
    (build / "lib" / "grp__mypyc.so").write_bytes(b"")
    manifest = {
        "tag": tag or accel._tag(),
        "group": "grp__mypyc",
        "group_extension": "lib/grp__mypyc.so",
        "modules": {"pkg.mod": {"source": "pkg/mod.py", "sha256": accel._sha(src), "extension": "lib/pkg/mod.so"}},
    }
    (build / accel.MANIFEST).write_text(json.dumps(manifest))
    return root, build


def test_a_build_of_the_current_sources_is_used(tmp_path, monkeypatch):
    monkeypatch.delenv(accel.ENV_PURE, raising=False)
    root, build = _fake_build(tmp_path)
    files, why = accel.check(build, root, modules=("pkg/mod.py",))
    assert why == "compiled"
    assert files == {"pkg.mod": build / "lib/pkg/mod.so", "grp__mypyc": build / "lib/grp__mypyc.so"}


def test_an_edited_source_makes_the_whole_build_stale(tmp_path, monkeypatch):
    monkeypatch.delenv(accel.ENV_PURE, raising=False)
    root, build = _fake_build(tmp_path)
    (root / "pkg" / "mod.py").write_text("X = 2\n")
    files, why = accel.check(build, root, modules=("pkg/mod.py",))
    assert files is None and why == "pure: pkg/mod.py changed since the build"


def test_no_build_another_interpreter_or_a_missing_extension_means_pure(tmp_path, monkeypatch):
    monkeypatch.delenv(accel.ENV_PURE, raising=False)
    root, build = _fake_build(tmp_path)
    mods = ("pkg/mod.py",)
    assert accel.check(tmp_path / "nowhere", root, modules=mods)[1].startswith("pure: not built")
    # a build of another module list (MODULES changed since): never half of each
    assert accel.check(build, root, modules=(*mods, "pkg/new.py"))[1] == "pure: the build compiled another set of modules"
    (build / "lib" / "pkg" / "mod.so").unlink()
    assert accel.check(build, root, modules=mods)[1].startswith("pure: missing")
    root2, build2 = _fake_build(tmp_path / "other", tag="cpython-39-linux")
    assert accel.check(build2, root2, modules=mods)[1].startswith("pure: built for cpython-39-linux")
    (build2 / accel.MANIFEST).write_text("{not json")
    assert accel.check(build2, root2, modules=mods)[1].startswith("pure: unreadable manifest")


def test_a_build_for_another_build_of_the_same_python_minor_version_means_pure(tmp_path, monkeypatch):
    """Two interpreters of one minor version (Debian's python3.11 and one
    compiled from source, say) share the extension suffix but not every
    CPython internal the compiled code touches: the tag names the
    interpreter's own build too, so a checkout shared by both never loads
    the other's build."""
    monkeypatch.delenv(accel.ENV_PURE, raising=False)
    root, build = _fake_build(tmp_path)
    mods = ("pkg/mod.py",)
    assert accel.check(build, root, modules=mods)[1] == "compiled"
    monkeypatch.setattr(sys, "version", sys.version + " (another build)")
    assert accel.check(build, root, modules=mods)[1].startswith("pure: built for ")


def test_kraftwerk_pure_turns_it_off(tmp_path, monkeypatch):
    root, build = _fake_build(tmp_path)
    monkeypatch.setenv(accel.ENV_PURE, "1")
    assert accel.check(build, root, modules=("pkg/mod.py",)) == (None, f"pure: {accel.ENV_PURE} is set")
    assert accel.check(build, root, env=False, modules=("pkg/mod.py",))[1] == "compiled"


@pytest.fixture(scope="module")
def fresh_build() -> None:
    """The real build, made now if the sources changed since the last one
    (scripts/bootstrap normally has made it; this takes under a minute)."""
    env = {k: v for k, v in os.environ.items() if k != accel.ENV_PURE}
    if accel.check(env=False)[1] != "compiled":
        subprocess.run([sys.executable, "-m", "reference_impl.accel", "build"], cwd=ROOT, env=env, check=True,
                       stdout=subprocess.DEVNULL)
    assert accel.check(env=False)[1] == "compiled"


_SEED_RUN = """
import json, sys
from harness.config import TestConfig
from harness.lifecycle.runner import sim_run
import reference_impl.core.partition as p
opts = TestConfig(backend="sim", time_limit=8, rate=200, nemesis=("partition", "kill"), nemesis_interval=2)
res = sim_run(opts, 11).run()
st = res["stats"]
print(json.dumps({"file": p.__file__, "accelerator": st["accelerator"], "digest": st["history_sha256"],
                  "valid": res["valid"], "steps": st["steps"], "messages": st["messages"], "faults": st["faults"]}))
"""


def _seed_run(pure: bool) -> dict:
    # PYTHONHASHSEED as kraftwerk sim's workers have it: one seed, one history
    env = {**{k: v for k, v in os.environ.items() if k != accel.ENV_PURE}, "PYTHONHASHSEED": "0"}
    if pure:
        env[accel.ENV_PURE] = "1"
    out = subprocess.run([sys.executable, "-c", _SEED_RUN], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_seed_replays_to_the_same_history_compiled_and_pure(fresh_build):
    compiled, pure = _seed_run(pure=False), _seed_run(pure=True)
    assert compiled["accelerator"] == "compiled" and compiled["file"].endswith(".so")
    assert pure["accelerator"] == f"pure: {accel.ENV_PURE} is set" and pure["file"].endswith(".py")
    assert compiled["faults"] > 0
    for k in ("digest", "valid", "steps", "messages", "faults"):
        assert compiled[k] == pure[k], k


def test_status_reports_the_build_whatever_kraftwerk_pure_says_and_bad_commands_exit_2(fresh_build, monkeypatch, capsys):
    from reference_impl.accel.__main__ import main

    monkeypatch.setenv(accel.ENV_PURE, "1")
    assert main(["status"]) == 0
    out, err = capsys.readouterr()
    assert out == "compiled\n" and accel.ENV_PURE in err
    for bad in (["frob"], ["build", "--fast"], ["status", "x"]):
        assert main(bad) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and err.startswith("usage:")


_INSTALL_FROM = """
import importlib.util, sys
from pathlib import Path
# the loader module alone, so that reference_impl's own install() does not run first
spec = importlib.util.spec_from_file_location("accel_probe", Path(sys.argv[2]) / "reference_impl/accel/__init__.py")
a = importlib.util.module_from_spec(spec)
spec.loader.exec_module(a)
print(a.install(Path(sys.argv[1]), Path(sys.argv[2])))
print(any(isinstance(f, a._CompiledFinder) for f in sys.meta_path))
"""


def _install_from(build: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != accel.ENV_PURE}
    out = subprocess.run([sys.executable, "-c", _INSTALL_FROM, str(build), str(ROOT)], env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.splitlines()


def test_a_build_that_passes_the_manifest_check_but_does_not_load_means_pure(fresh_build, tmp_path):
    """A corrupt shared library (truncated, overwritten) with an intact
    manifest: the loader refuses the whole build before serving any module
    from it, instead of failing the first import."""
    import shutil

    build = tmp_path / "accel"
    shutil.copytree(accel.ACCEL_DIR, build, ignore=shutil.ignore_patterns("lock"))
    assert _install_from(build) == ["compiled", "True"]
    group = json.loads((build / accel.MANIFEST).read_text())["group_extension"]
    (build / group).write_bytes(b"\x7fELF this is not a shared object")
    status, finder = _install_from(build)
    assert status.startswith("pure: the build does not load (") and finder == "False"


_SCAN = """
import hashlib, sys
from pathlib import Path
import reference_impl
import checkers.queue.lines as lines
from checkers.history import write_jsonl
from tests.checkers.test_columnar_reading import _folds, _line_starts, _scan, _spliced_history
path = Path(sys.argv[1])
write_jsonl(path, _spliced_history())
digests = [hashlib.sha256(repr(_folds(_scan(path, [], readers=len(cuts), cuts=cuts))).encode()).hexdigest()
           for cuts in ([0], [0, _line_starts(path)[1500]])]
print(lines.__file__, *digests)
"""


def test_a_history_is_read_to_the_same_folds_by_the_compiled_line_reader_and_the_source(fresh_build, tmp_path):
    """The queue checker's line reader (checkers/queue/lines.py) is in the
    build: a history read compiled and pure, in one range and in two,
    leaves every fold the same."""
    env = {k: v for k, v in os.environ.items() if k != accel.ENV_PURE}
    outs = []
    for pure in (False, True):
        e = {**env, accel.ENV_PURE: "1"} if pure else env
        out = subprocess.run([sys.executable, "-c", _SCAN, str(tmp_path / "h.jsonl")], cwd=ROOT, env=e,
                             check=True, capture_output=True, text=True)
        outs.append(out.stdout.split())
    (compiled_file, *compiled), (pure_file, *pure) = outs
    assert compiled_file.endswith(".so") and pure_file.endswith(".py")
    assert compiled == pure and compiled[0] == compiled[1]


_OPS = """
import hashlib, sys
import reference_impl
import checkers.queue.opbatch as opbatch
from checkers.queue.scan import QueueScan, scan_ops
from checkers.queue.synth import valid_history
from tests.checkers.test_columnar_reading import _folds, _spliced_history
from tests.checkers.test_op_batches import _with_send_fields
histories = [_spliced_history(), _with_send_fields(valid_history(2000, 3, 8, seed=1, max_poll=20), 1)]
digests = [hashlib.sha256(repr(_folds(f(h))).encode()).hexdigest() for h in histories
           for f in (QueueScan.of, scan_ops, lambda h: scan_ops(h, 5, 0))]
from checkers.availability.factpass import FactPass
from tests.checkers.test_availability import _mixed_history
facts = []
for h in [*histories, _mixed_history(True).ops]:
    p = FactPass()
    scan_ops(h, facts=p)
    facts.append(repr(p.finish()))
import checkers.availability.factpass as factpass
print(opbatch.__file__, factpass.__file__, *digests, hashlib.sha256(repr(facts).encode()).hexdigest())
"""


def test_a_list_of_operations_is_batched_to_the_same_folds_compiled_and_pure(fresh_build):
    """The batches a list of operations is read into (checkers/queue/opbatch.py,
    a simulated seed's checkers) are in the build: compiled and pure, in
    batches of any size, every fold is the one-at-a-time fold's; and the
    availability checker's pass fed on the same walk
    (checkers/availability/factpass.py) makes the same facts."""
    env = {k: v for k, v in os.environ.items() if k != accel.ENV_PURE}
    outs = []
    for pure in (False, True):
        e = {**env, accel.ENV_PURE: "1"} if pure else env
        out = subprocess.run([sys.executable, "-c", _OPS], cwd=ROOT, env=e, check=True, capture_output=True,
                             text=True)
        outs.append(out.stdout.split())
    (compiled_file, compiled_facts, *compiled), (pure_file, pure_facts, *pure) = outs
    assert compiled_file.endswith(".so") and pure_file.endswith(".py")
    assert compiled_facts.endswith(".so") and pure_facts.endswith(".py")
    assert compiled == pure
    assert compiled[0] == compiled[1] == compiled[2] and compiled[3] == compiled[4] == compiled[5]


_LINEARIZABLE = """
import hashlib, json, sys, tempfile
from pathlib import Path
import reference_impl
import checkers.linearizable.wgl as wgl
from checkers.history import edn, read_edn
from checkers.linearizable import check
from checkers.linearizable.synth import register_history
from tests.checkers.test_linearizable_windows import _appends_then_stale_get
from tests.shared_data import KNOSSOS

def digest(r):
    r = json.loads(json.dumps(r, default=str))
    r["stats"].pop("elapsed_s")
    return r

out = [digest(check(_appends_then_stale_get(40), model="kv")),
       digest(check(register_history(3000, clients=6, seed=3, crash_p=0.02), model="cas-register", initial=0))]
with tempfile.TemporaryDirectory() as d:
    # one map per line, the key in a field of its own (Porcupine's kv logs): the flat reader's layout
    flat = Path(d) / "kv.edn"
    flat.write_text("".join('{:process %d, :type :%s, :f :%s, :key "k", :value %s}\\n'
                            % (o.process, o.type, o.f, "nil" if o.value[1] is None else '"%s"' % o.value[1])
                            for o in _appends_then_stale_get(40)))
    assert edn._read_flat(flat.read_text()) is not None
    ops = read_edn(flat)
    out.append([o.to_dict() for o in ops])
    out.append(digest(check(ops, model="kv")))
for path in sorted(KNOSSOS.glob("cas-register/*/*.edn"))[::4]:
    ops = read_edn(path)
    out.append([o.to_dict() for o in ops])
    out.append(digest(check(ops, model="cas-register", initial=0)))
import checkers.history.flat as flat_reader
print(wgl.__file__, flat_reader.__file__, hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest())
"""


def test_histories_check_to_the_same_results_with_the_compiled_linearizability_checker(fresh_build):
    """The EDN reader's flat-line path and the WGL search with its
    look-ahead are in the build: kv and register histories, a kv log of
    Porcupine's layout and Knossos files read and check to the same results
    (verdicts, failing ops, search counts) compiled and pure."""
    env = {k: v for k, v in os.environ.items() if k != accel.ENV_PURE}
    outs = []
    for pure in (False, True):
        e = {**env, accel.ENV_PURE: "1"} if pure else env
        out = subprocess.run([sys.executable, "-c", _LINEARIZABLE], cwd=ROOT, env=e,
                             check=True, capture_output=True, text=True)
        outs.append(out.stdout.split())
    (compiled_file, compiled_flat, compiled), (pure_file, pure_flat, pure) = outs
    assert compiled_file.endswith(".so") and pure_file.endswith(".py")
    assert compiled_flat.endswith(".so") and pure_flat.endswith(".py")
    assert compiled == pure


def test_the_checkers_the_harness_imports_early_bring_in_no_python_copy_of_a_compiled_module():
    """The harness imports ``checkers.check`` and ``checkers.history`` before
    the loader in places (``kraftwerk check`` does): a build's module that
    comes with them (``checkers.history.op``, the Op) must come compiled,
    the loader put in first (``checkers.history`` imports
    ``reference_impl``), or the whole build would stay unused."""
    code = ("import sys, checkers.check, checkers.history\n"
            "from reference_impl import accel\n"
            "print(accel.status(), *[sys.modules[m].__file__ for m in map(accel.module_name, accel.MODULES)\n"
            "                        if m in sys.modules])")
    env = {k: v for k, v in os.environ.items() if k != accel.ENV_PURE}  # the compiled build, in either pass
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    status, *files = out.stdout.split()
    assert status == "compiled", out.stdout
    assert files and all(f.endswith(".so") for f in files), out.stdout


_OP_PICKLE = """
import pickle, sys
import checkers.history.op as op_module
from checkers.history import Op
if sys.argv[1] == "dump":
    ops = [Op("invoke", "send", [["send", "t-0", 7]], 3, 10, 0, None, {"acks": "all"}),
           Op("info", "start-partition", ["n1"], "nemesis", 11, 1, "timeout", {})]
    sys.stdout.write(op_module.__file__ + " " + pickle.dumps(ops).hex())
else:
    ops = pickle.loads(bytes.fromhex(sys.stdin.read()))
    sys.stdout.write(op_module.__file__ + " " + repr([o.to_dict() for o in ops]))
"""


def test_an_op_pickled_compiled_loads_pure_and_back(fresh_build):
    """The Op is compiled (checkers.history.op in the build): Spark's
    workers may run the other mode than the driver, so a pickle of either
    mode loads in the other, to the same fields (Op.__reduce__: the compiled
    class pickled a dict of its fields, the dataclass a list, and the pure
    class could not read the compiled pickle)."""
    env = {k: v for k, v in os.environ.items() if k != accel.ENV_PURE}
    modes = {"compiled": env, "pure": {**env, accel.ENV_PURE: "1"}}

    def run(mode: str, *args: str, stdin: str = "") -> tuple[str, str]:
        out = subprocess.run([sys.executable, "-c", _OP_PICKLE, *args], cwd=ROOT, env=modes[mode], input=stdin,
                             check=True, capture_output=True, text=True).stdout
        file, _, rest = out.partition(" ")
        assert file.endswith(".so" if mode == "compiled" else ".py"), (mode, file)
        return file, rest

    want = repr([{"index": 0, "time": 10, "process": 3, "type": "invoke", "f": "send",
                  "value": [["send", "t-0", 7]], "acks": "all"},
                 {"index": 1, "time": 11, "process": "nemesis", "type": "info", "f": "start-partition",
                  "value": ["n1"], "error": "timeout"}])
    for made, read in (("compiled", "pure"), ("pure", "compiled")):
        _, pickled = run(made, "dump")
        assert run(read, "load", stdin=pickled)[1] == want, (made, read)
