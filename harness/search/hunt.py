"""Search on the model, confirm on real Kafka (``kraftwerk hunt``).

The simulator runs thousands of fault schedules in the time real Kafka
runs one, and the reference implementation in it is a model of Kafka's
replication. A hunt spends a share of its budget exploring schedules on
the simulator (``harness.search.explore``: coverage of protocol states,
mutants of the schedules that reached new ones) with the real side's
timeouts mapped onto the model (:func:`harness.config.timings.kafka_mapped`,
the settings ``kraftwerk compare`` runs the reference with), ranks the
runs worth a real one (:func:`score`: invalid, unknown, near misses such as
a leader alone in its ISR with its HW behind its log end, new protocol
states), and replays each, from its schedule file, on the real db (Kafka on
a kernel backend: netns by default). Each pair is classified
(:func:`classify`):

* ``both-invalid``: the model predicted it and Kafka did it: a Kafka finding;
* ``model-only``: a model bug (or a rule Kafka has that the model lacks);
* ``real-only``: Kafka lost what the model kept: a rule the model lacks;
* ``both-valid``.

Everything the hunt knows is in ``OUT/hunt.json``, written after each run,
so an interrupted hunt goes on where it stopped (``kraftwerk hunt`` again
with the same ``--out``), and ``OUT/index.html`` is its page.
"""

from __future__ import annotations

import fcntl
import json
import random
import shutil
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from harness.config import TestConfig
from harness.config.settings import REPLAYED
from harness.errors import UsageError
from harness.lifecycle.runner import run_seed, run_test
from harness.report.hunt import render_hunt
from harness.search import compare
from harness.search.explore import GENERIC_MIX, Outcome, Search, _trace_events, states

STATE = "hunt.json"
FORMAT = "kraftwerk-hunt/1"
#: the classes of a pair (sim, real), worst first
CLASSES = ("both-invalid", "real-only", "model-only", "unknown", "both-valid")


# -- what a simulated run shows -------------------------------------------------------------
def near_misses(events: Iterator[dict[str, Any]]) -> set[str]:
    """States one fault away from losing acknowledged writes, from a
    simulated run's traces: a leader alone in its ISR that advances its HW
    (it commits records no other replica holds: its loss loses them), an
    unclean election, a full truncation. (A last-known-leader election,
    KIP-966's recovery once every ISR member died, is common under kills
    of a majority: not a near miss.)"""
    out: set[str] = set()
    hw: dict[tuple[Any, str], int] = {}  # (node, tp): its last HW
    alone: dict[tuple[Any, str], int] = {}  # (leader, tp) whose ISR is itself: its HW when it became so
    for e in events:
        kind, key = e.get("kind"), (e.get("node"), str(e.get("tp")))
        if kind == "isr":
            if len(e.get("isr") or ()) == 1:
                alone.setdefault(key, hw.get(key, 0))
            else:
                alone.pop(key, None)
        elif kind == "hw":
            hw[key] = int(e.get("hw", 0))
            if e.get("role") == "leader" and key in alone and hw[key] > alone[key]:
                out.add("isr-of-one-commits")
        elif kind == "election" and e.get("data_kind") == "unclean":
            out.add("election-unclean")
        elif kind == "truncate" and e.get("reason") == "full":
            out.add("truncate-full")
    return out


def sim_one(cfg: TestConfig, seed: int, schedule: list[dict[str, Any]] | None, dest: str) -> dict[str, Any]:
    """One simulated run (a worker's job): ``schedule`` replayed (else the
    configuration's own seeded nemesis), its run directory under ``dest``;
    what the hunt needs to rank it."""
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    try:
        if schedule is not None:
            f = out / f"mutant-{seed}.json"
            f.write_text(json.dumps(schedule))
            cfg = cfg.replaying(str(f))
        res = run_seed(cfg, seed, out)
    except Exception as e:  # a harness bug: this run is unknown, the hunt goes on
        return {"seed": seed, "valid": "unknown", "error": f"{type(e).__name__}: {e}", "states": [],
                "near": [], "schedule": schedule or [], "placement": {}, "run_dir": None}
    run_dir = Path(res["run_dir"])
    test = json.loads((run_dir / "test.json").read_text())
    return {"seed": seed, "valid": res.get("valid"), "anomalies": list(res.get("anomaly_types") or []),
            "states": sorted(states(_trace_events(run_dir))), "near": sorted(near_misses(_trace_events(run_dir))),
            "schedule": test.get("schedule") or [], "placement": test.get("placement") or {},
            "run_dir": str(run_dir),
            "summary": compare.summarize(run_dir, res)}


def model_placement(c: dict[str, Any]) -> dict[str, list[str]] | None:
    """The replicas the candidate's topics had on the model (None if it
    has none recorded): the candidate's own, else its simulated run's
    test.json (a hunt saved before candidates carried it). The real run
    creates its topics with them, so a reassignment's or decommission's
    recorded moves fit the replicas they were drawn on."""
    if c.get("placement"):
        return dict(c["placement"])
    run_dir = (c.get("sim") or {}).get("run_dir")
    if not run_dir:
        return None
    try:
        test = json.loads((Path(run_dir) / "test.json").read_text())
    except (OSError, ValueError):
        return None
    return (test.get("placement") or None) if isinstance(test, dict) else None


def score(c: dict[str, Any]) -> int:
    """How much a simulated run is worth a real one (0: not at all; a run
    the harness could not play has no schedule to replay)."""
    v = c["sim"]["valid"]
    if c["sim"].get("error"):
        return 0
    return (1000 if v is False else 0) + (50 if v not in (True, False) else 0) + 100 * len(c["near"]) \
        + 10 * len(c["new_states"])


def late_ms(run_dir: Any) -> int | None:
    """How late the real run's nemesis played its latest op against the
    schedule's nominal time (``at_ms - nominal_ms``, ``nemesis.replay``):
    a nemesis busy for long (an Observer call into a cluster that does not
    answer) plays the rest of the schedule late, so the pair compares two
    different schedules."""
    if not run_dir:
        return None
    try:
        sched = json.loads((Path(run_dir) / "test.json").read_text()).get("schedule") or []
    except (OSError, ValueError):
        return None
    lates = [int(e["at_ms"]) - int(e["nominal_ms"]) for e in sched if e.get("nominal_ms") is not None]
    return max(lates, default=0)


def classify(sim_valid: Any, real_valid: Any) -> str:
    """A pair's class, from the two verdicts."""
    if sim_valid not in (True, False) or real_valid not in (True, False):
        return "unknown"
    return {(False, False): "both-invalid", (False, True): "model-only", (True, False): "real-only",
            (True, True): "both-valid"}[(sim_valid, real_valid)]


def exit_code(pairs: list[dict[str, Any]]) -> int:
    """1 if a pair is a finding or a disagreement, else 3 if one is
    unknown, else 0."""
    classes = {p["class"] for p in pairs}
    if classes & {"both-invalid", "real-only", "model-only"}:
        return 1
    return 3 if "unknown" in classes else 0


@contextmanager
def held(lock: str | None, say: Callable[[str], None]) -> Iterator[None]:
    """The machine-wide lock around one real run (none: nothing held)."""
    if lock is None:
        yield
        return
    with open(lock, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for {lock}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# -- the hunt --------------------------------------------------------------------------------
def same_settings(saved: Any, now: dict[str, Any]) -> bool:
    """Whether a saved hunt's settings are these. A setting added to
    TestConfig after the state was written is absent from it; it matches
    while it has its default, so a long campaign resumes across a new
    option. A changed setting, or a new one given another value, is still
    refused."""
    if not isinstance(saved, dict) or not isinstance(saved.get("real"), dict):
        return False
    if {k: v for k, v in saved.items() if k != "real"} != {k: v for k, v in now.items() if k != "real"}:
        return False
    defaults = TestConfig().model_dump(mode="json")
    for k, v in now["real"].items():
        if k in saved["real"] and saved["real"][k] != v:
            return False
        if k not in saved["real"] and (k not in defaults or defaults[k] != v):
            return False
    return set(saved["real"]) <= set(now["real"])


@dataclass
class Hunt:
    """A hunt's settings and state (``OUT/hunt.json``)."""

    sim_cfg: TestConfig
    real_cfg: TestConfig
    budget_s: float
    out: Path
    explore_share: float = 0.3
    lock: str | None = None
    say: Callable[[str], None] = print
    state: dict[str, Any] = field(default_factory=dict)

    def settings(self) -> dict[str, Any]:
        """What must match for an interrupted hunt to be resumed."""
        real = self.real_cfg.model_dump(mode="json", exclude={"out", "name", "seed"})
        return {"real": real, "sim_protocol": self.sim_cfg.protocol, "budget_s": self.budget_s,
                "explore_share": self.explore_share}

    def load(self) -> bool:
        """The state of an interrupted hunt in ``out``, if any (True: resumed)."""
        f = self.out / STATE
        if not f.exists():
            self.state = {"format": FORMAT, "settings": self.settings(), "spent_s": 0.0, "explore_s": 0.0,
                          "phase": "explore", "tried": 0, "seen": [], "corpus": [], "candidates": [], "pairs": []}
            return False
        try:
            state = json.loads(f.read_text())
        except ValueError:
            raise UsageError(f"{f}: not a hunt's state (not JSON); give another --out") from None
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise UsageError(f"{f}: not a {FORMAT} state; give another --out")
        if not same_settings(state.get("settings"), json.loads(json.dumps(self.settings()))):
            raise UsageError(f"{f} is a hunt with other settings: give the same flags to resume it, or another --out")
        self.state = state
        return True

    def save(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / f".{STATE}.tmp"
        tmp.write_text(json.dumps(self.state, indent=1, default=str))
        tmp.replace(self.out / STATE)
        write_page(self.out, self.state)

    def spent(self, t0: float, base: float) -> float:
        return base + time.monotonic() - t0

    # -- exploring on the model ----------------------------------------------------------------
    def explore(self, pool: ProcessPoolExecutor, jobs: int) -> None:
        """Simulated runs until the explore share of the budget is spent;
        every run that is invalid, unknown, a near miss or new is a
        candidate, the rest are removed."""
        st = self.state
        search = Search(self.sim_cfg, 0, str(self.out), rng=random.Random(st["tried"]),
                        mix=tuple(self.real_cfg.nemesis) or GENERIC_MIX)
        search.seen, search.corpus, search.tried = set(st["seen"]), list(st["corpus"]), st["tried"]
        limit = self.budget_s * self.explore_share
        t0, base = time.monotonic(), st["explore_s"]
        pending: dict[Any, int] = {}
        seed, last = st["tried"], -10.0
        while self.spent(t0, base) < limit or pending:
            while len(pending) < jobs and self.spent(t0, base) < limit:
                pending[pool.submit(sim_one, self.sim_cfg, seed, search.next_job(), str(self.out / "sim"))] = seed
                seed += 1
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in done:
                pending.pop(fut)
                self._absorb(search, fut.result())
            st.update(explore_s=self.spent(t0, base), tried=search.tried, seen=sorted(search.seen),
                      corpus=search.corpus)
            if st["explore_s"] - last >= 10 or (not pending and st["explore_s"] >= limit):
                last = st["explore_s"]
                self.say(f"explore {st['explore_s']:5.0f}s  runs {search.tried}  {search.covered(', ', False)}  "
                         f"candidates {len(st['candidates'])}")
                self.save()
        st.update(phase="confirm", spent_s=st["explore_s"])
        self.save()

    def _absorb(self, search: Search, r: dict[str, Any]) -> None:
        new = sorted(set(r["states"]) - search.seen)
        search.absorb(Outcome(r["seed"], r["valid"], set(r["states"]), r["schedule"], r["run_dir"],
                              r.get("anomalies") or [], r.get("error")), 0.0)
        c = {"seed": r["seed"], "near": r["near"], "new_states": new, "schedule": r["schedule"],
             "placement": r.get("placement") or {}, "sim": {"valid": r["valid"], "anomalies": r.get("anomalies") or [], "run_dir": r["run_dir"],
                     "error": r.get("error"), "summary": r.get("summary")}}
        if score(c) > 0:
            c["id"], c["score"] = len(self.state["candidates"]), score(c)
            self.state["candidates"].append(c)
        elif r["run_dir"]:
            shutil.rmtree(r["run_dir"], ignore_errors=True)

    # -- confirming on the real db ---------------------------------------------------------------
    def ranked(self) -> list[dict[str, Any]]:
        done = {p["id"] for p in self.state["pairs"]}
        todo = [c for c in self.state["candidates"] if c["id"] not in done]
        return sorted(todo, key=lambda c: (-c["score"], c["id"]))

    def schedule_file(self, c: dict[str, Any]) -> Path:
        """The candidate's schedule file: its settings (those a replay
        takes) and fault schedule, replayable by ``kraftwerk run --schedule``
        on either db, and by ``kraftwerk sim --schedule``. Its placement is
        the model's (:func:`model_placement`): a replay on Kafka creates
        the topics with those replicas instead of Kafka's own."""
        f = self.out / "schedules" / f"{c['id']:04d}-seed{c['seed']}.json"
        if not f.exists():
            test = self.real_cfg.model_copy(update={"seed": c["seed"], "placement": model_placement(c)}) \
                .model_dump(mode="json")
            body = {k: test[k] for k in REPLAYED if k in test and k not in ("protocol", "name")}
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps({**body, "schedule": c["schedule"]}, indent=1) + "\n")
        return f

    def confirm(self, seconds: float | None = None) -> None:
        """Replay the ranked candidates on the real db while the budget
        lasts, or ``seconds`` more of it (a batch of a campaign): a run is
        not started unless the longest one so far fits in what is left."""
        st = self.state
        t0, base = time.monotonic(), st["spent_s"]
        budget = self.budget_s if seconds is None else base + seconds
        per_run = 2 * self.real_cfg.time_limit + 30.0  # set-up, load, final reads, teardown: measured below
        for c in self.ranked():
            left = budget - self.spent(t0, base)
            if left < per_run:
                self.say(f"budget: {left:.0f}s left, a real run takes about {per_run:.0f}s; stopping")
                break
            f = self.schedule_file(c)
            cfg = self.real_cfg.model_copy(update={"seed": c["seed"], "name": f"hunt-{c['id']:04d}"}) \
                .replaying(str(f), placement=recorded_placement(f))
            self.say(f"confirm #{c['id']} seed {c['seed']} (score {c['score']}, model "
                     f"{_verdict(c['sim']['valid'])}) on {cfg.db} {cfg.backend}")
            started = time.monotonic()
            with held(self.lock, self.say):
                pair = self._real_run(c, cfg, f)
            per_run = max(per_run, time.monotonic() - started)
            st["pairs"].append(pair)
            st["spent_s"] = self.spent(t0, base)
            self.say(f"  -> {pair['class']}: model {_verdict(pair['sim']['valid'])}, {cfg.db} "
                     f"{_verdict(pair['real']['valid'])}  ({len(st['pairs'])} pairs, {st['spent_s']:.0f}s spent)")
            self.save()
        st["spent_s"] = self.spent(t0, base)
        st["phase"] = "done" if seconds is None or not self.ranked() else "confirm"
        self.save()

    def _real_run(self, c: dict[str, Any], cfg: TestConfig, f: Path) -> dict[str, Any]:
        try:
            o = run_test(cfg, progress=False, report=True)
            real = {**compare.summarize(o.run_dir, o.result), "error": o.result.get("error")}
        except Exception as e:  # a run that could not be played: unknown, the hunt goes on
            real = {"valid": "unknown", "error": f"{type(e).__name__}: {e}", "run_dir": None,
                    "durability": {}, "anomaly_types": []}
        sim = c["sim"].get("summary") or {"valid": c["sim"]["valid"], "durability": {}, "anomaly_types": []}
        agree = compare.agreement(sim, real) if real.get("run_dir") and c["sim"].get("summary") else {}
        return {"id": c["id"], "seed": c["seed"], "score": c["score"], "near": c["near"],
                "late_ms": late_ms(real.get("run_dir")),
                "new_states": len(c["new_states"]), "schedule_file": str(f),
                "command": f"kraftwerk run --db {cfg.db} --backend {cfg.backend} --schedule {f}",
                "faults": sorted({e["fault"] for e in c["schedule"]}),
                "class": classify(c["sim"]["valid"], real.get("valid")), "agree": agree,
                "sim": {**sim, "run_dir": c["sim"]["run_dir"]}, "real": real}

    def run(self, pool: ProcessPoolExecutor | None, jobs: int) -> int:
        resumed = self.load()
        if resumed:
            self.say(f"resuming {self.out / STATE}: phase {self.state['phase']}, {self.state['tried']} simulated "
                     f"runs, {len(self.state['pairs'])} pairs")
        if self.state["phase"] == "explore":
            assert pool is not None
            self.explore(pool, jobs)
        if self.state["phase"] == "confirm":
            self.confirm()
        return exit_code(self.state["pairs"])


def recorded_placement(f: Path) -> dict[str, list[str]] | None:
    """The placement a schedule file pins (None: the db places the
    replicas itself), as ``kraftwerk run --schedule`` takes it."""
    try:
        body = json.loads(f.read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{f}: not a schedule file ({type(e).__name__})") from None
    return (body.get("placement") or None) if isinstance(body, dict) else None


def _verdict(v: Any) -> str:
    return {True: "valid", False: "INVALID"}.get(v, "unknown") if isinstance(v, bool) or v is None else str(v)


def table(pairs: list[dict[str, Any]]) -> dict[str, int]:
    """How many pairs of each class."""
    return {k: sum(1 for p in pairs if p["class"] == k) for k in CLASSES}


def write_page(out: Path, state: dict[str, Any]) -> Path:
    """The hunt's page (``OUT/index.html``) and its JSON (``OUT/hunt-pairs.json``)."""
    pairs = state.get("pairs") or []
    (out / "hunt-pairs.json").write_text(json.dumps({"classes": table(pairs), "pairs": pairs}, indent=1,
                                                    default=str))
    return render_hunt(out / "index.html", state, table(pairs))
