"""One test's lifecycle, Jepsen's order, for both runtimes (:func:`run_lifecycle`):

run directory and test.json -> set-up (start the db) -> run generator (client
ops with the nemesis schedule interleaved) -> final generator (heal every
fault, let the cluster recover, final reads) -> teardown -> schedule into
test.json -> check (results.json) -> history.edn, summary.json -> report
(index.html, plots).

The runtime is the only difference (:class:`Runtime`): real processes
(:class:`ProcessRuntime`, ``kraftwerk run``: a db on a backend, the
interpreter's threads, a state file; whatever happens in the middle,
teardown runs and the state file is removed only after every process it
lists is gone) or the simulator (:class:`SimRuntime`, ``kraftwerk sim``).
"""

from __future__ import annotations

import json
import random
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

import generator as g
from checkers.history import read_jsonl
from harness import dbs
from harness.dbs.reference.db import protocol_config
from harness.report import render_report
from harness.runtimes.sim import SimRun
from harness.rundir.trust import check_dir
from harness.rundir import store
from harness.lifecycle import liveness
from harness.lifecycle.checking import check_run, export_edn
from harness.config import TestConfig
from harness.config.placement import as_created
from harness.errors import HarnessError, KraftwerkError, UsageError
from checkers.history.recorder import Recorder
from harness.lifecycle.interpreter import Interpreter
from harness.lifecycle.virtual import VirtualInterpreter
from harness.lifecycle.progress import Progress
from harness.rundir.state import RunState
from harness.rundir.summary import differs_line, resolution_differs, write_summary
from nemesis import Nemesis, replay
from nemesis.control import Unsupported
from nemesis.faults import check_supported
from nemesis.scenarios import duration as scenario_duration
from nemesis.stories import step_ops
from reference_impl.sim.control import CAPABILITIES as SIM_CAPABILITIES
from workloads import ctp as cw
from workloads import queue as qw
from workloads import txn as tw
from workloads.crash import crash_clients


@dataclass
class RunOutcome:
    run_dir: Path
    result: dict[str, Any]


def preflight(cfg: TestConfig) -> Any:
    """Checks that need the machine but start nothing (faults the runtime
    can make, ports free, binaries present, the backend's hosts reachable);
    returns what the backend checked. The results directory is one this
    user may write in (:func:`harness.rundir.trust.trusted_dir`; made with
    the run directory, later) before any seed or node starts."""
    check_dir(cfg.out, "--out")
    if cfg.backend != "sim":
        return dbs.preflight(cfg)
    try:
        check_supported(cfg.faults(), cfg.backend, SIM_CAPABILITIES)
    except Unsupported as e:
        raise UsageError(str(e)) from None
    return None


def workload_generator(cfg: TestConfig) -> g.Gen:
    """The client operations of ``cfg.workload``, unbounded."""
    keys = cfg.keys()
    if cfg.workload == "txn":
        return tw.txn_generator(keys, cfg.max_txn_length, cfg.abort_probability)
    if cfg.workload == "ctp":
        return cw.ctp_generator(keys, cfg.acks_for_thread, cfg.idempotent_for_thread, transactional=cfg.ctp_txn)
    return qw.workload_generator(keys, cfg.acks_for_thread, idempotent_for_thread=cfg.idempotent_for_thread,
                                 sub_via=cfg.sub_via)


def client_factory(cfg: TestConfig, bootstrap: str) -> Callable[[int, int], Any]:
    """Builds the client of a (thread, process) for ``cfg.workload``."""
    keys = cfg.keys()

    def client(thread: int, process: int) -> Any:
        if cfg.workload == "txn":
            # the thread's transactional id: a replacement fences its predecessor
            return tw.TxnClient(bootstrap, keys, process, cfg.op_timeout, f"kraftwerk-{cfg.name}-{thread}",
                                cfg.final_read_timeout, cfg.isolation_level, retries=cfg.retries,
                                auto_offset_reset=cfg.auto_offset_reset)
        # --static-members: the thread's group.instance.id, kept by its replacements
        instance = f"kraftwerk-{cfg.name}-{cfg.seed}-t{thread}" if cfg.static_members else None
        if cfg.workload == "ctp":  # one group of every process; the thread's transactional id
            return cw.CtpClient(bootstrap, keys, process, cfg.op_timeout, group_id=f"kraftwerk-{cfg.name}-{cfg.seed}",
                                topic_prefix=cfg.topic_prefix, transactional=cfg.ctp_txn,
                                transactional_id=f"kraftwerk-{cfg.name}-{thread}",
                                idempotent=cfg.idempotent_for_thread(thread),
                                final_read_timeout=cfg.final_read_timeout, isolation_level=cfg.isolation_level,
                                retries=cfg.retries, auto_offset_reset=cfg.auto_offset_reset,
                                instance_id=instance)
        return qw.QueueClient(
            bootstrap, keys, cfg.acks_for_thread(thread), process, cfg.op_timeout, cfg.final_read_timeout,
            idempotent=cfg.idempotent_for_thread(thread), isolation_level=cfg.isolation_level,
            retries=cfg.retries, auto_offset_reset=cfg.auto_offset_reset,
            sub_via=cfg.sub_via, group_id=f"kraftwerk-{cfg.name}-{cfg.seed}", instance_id=instance,
        )

    return client


def generator_rng(seed: int) -> random.Random:
    """The generator's rng (the clients' choices: which thread, which key,
    send or poll), derived from the seed alike on both runtimes. The fault
    schedule never draws from it (``nemesis.draw_rng``)."""
    return random.Random(f"generator/{seed}")


def build_generator(cfg: TestConfig, nem: Any | None) -> g.Gen:
    """The whole test as one generator, for both runtimes (Jepsen's
    shape): the workload at ``rate`` (with crashed clients) beside the
    nemesis schedule, both for ``time_limit``; then the final heal, a sleep
    for the cluster to recover, and the final reads, each phase once every
    operation of the one before has completed."""
    keys = cfg.keys()
    limit = cfg.time_limit
    script = cfg.script()  # a scripted scenario (stories are faults of a mix)
    if script:  # clients keep writing for the whole script
        limit = max(limit, scenario_duration(script))
    ops = g.rate(cfg.rate, workload_generator(cfg))
    if cfg.crash_clients:
        ops = crash_clients(ops, cfg.crash_client_interval, cfg.concurrency)
    # the limit counts from the operations' start (time 0), not from the
    # first op dispatched: so where the schedule ends is the seed's too
    end = int(limit * g.NS)
    client_gen = g.clients(g.TimeLimit(end, ops, end))
    main = client_gen
    if nem is not None:
        sched = nem.schedule() if script else nem.schedule(end)
        main = g.any_(client_gen, g.nemesis(sched))
    parts: list[Any] = [main]
    probes = liveness.probes(cfg)  # acks=all writes from the heal on: the availability checker's evidence
    if nem is not None:
        parts.append(g.nemesis(nem.final()))
        parts.append(g.any_(g.nemesis(g.sleep_for(nem.recovery_seconds)), probes))
    elif probes is not None:
        parts.append(probes)
    parts.append(qw.final_generator(keys, cfg.concurrency, cfg.final_read_timeout, tuple(cfg.output_keys())))
    return g.phases(*parts)


class Runtime(Protocol):
    """What differs between the runtimes in one test's lifecycle. The
    lifecycle (:func:`run_lifecycle`) is the same for both: test.json,
    then the runtime plays the test (set-up, generator, interpreter, final
    reads, teardown), then the schedule, the checks (results.json), the
    summary and the report."""

    #: whether the run recorded a history (no history: no checks)
    recorded: bool

    def test_json(self) -> dict[str, Any]: ...

    def play(self) -> None:
        """Set up, run the generator through the interpreter, heal, read
        finally, tear down; raises a :class:`KraftwerkError` if the run
        could not be played (the history recorded so far stays)."""

    def schedule(self) -> list[dict[str, Any]]:
        """What the nemesis did, in the shared vocabulary (``nemesis.replay``)."""

    def placement(self) -> dict[str, list[str]]:
        """Each input partition's replicas as the topics were created
        (``harness.config.placement``): a replay pins them."""

    def results(self, run_dir: Path | None) -> dict[str, Any]:
        """The checkers' verdict on the history (results.json)."""


def run_lifecycle(rt: Runtime, run_dir: Path | None, report: bool) -> dict[str, Any]:
    """One test's lifecycle, for either runtime: test.json, play, then (with
    a history) the schedule into test.json, results.json, history.edn,
    summary.json and, with ``report``, the HTML report. A run that could not
    be played leaves error.txt beside what it recorded and raises."""
    if run_dir is not None:
        store.write_json(run_dir / store.TEST, rt.test_json())
    try:
        rt.play()
    except Exception as e:
        # any failure, not only the runtime's own errors, leaves its line
        # beside the history recorded so far
        if run_dir is not None:
            line = str(e) if isinstance(e, KraftwerkError) else f"{type(e).__name__}: {e}"
            (run_dir / "error.txt").write_text(line + "\n")
        raise
    if run_dir is None or not rt.recorded:
        return rt.results(None)
    record_schedule(run_dir, rt.schedule(), rt.placement())
    result = rt.results(run_dir)
    store.write_json(run_dir / store.RESULTS, result)
    export_edn(run_dir)
    write_summary(run_dir)
    if report:
        _render_quietly(run_dir)
    return result


class ProcessRuntime:
    """Real processes: a db on a backend (local, netns, docker, ssh), the
    interpreter's threads in real time, librdkafka clients; a state file
    lists what runs so ``kraftwerk cleanup`` can reap it."""

    def __init__(self, cfg: TestConfig, run_dir: Path, checked: Any, progress: bool | None,
                 stop: threading.Event | None) -> None:
        self.cfg, self.run_dir, self.checked, self.stop = cfg, run_dir, checked, stop
        self.run_id = f"{cfg.name}-{run_dir.name}"
        self.recorded = cfg.record_history
        self.rec = Recorder(run_dir / store.HISTORY if cfg.record_history else None, cfg.history_fsync_every)
        self.progress = progress
        #: the run's wall time, set-up to teardown (the simulator's is its own: ``SimRun``)
        self.wall_s: float | None = None
        #: each input partition's replicas once the topics were created (``placed``)
        self._placed: dict[str, list[str]] = {}

    def test_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, **self.cfg.test_json(), "liveness_bound": liveness.bound_for(self.cfg).as_dict()}

    def play(self) -> None:
        t0 = time.monotonic()
        try:
            self._play()
        finally:
            self.wall_s = time.monotonic() - t0

    def _play(self) -> None:
        cfg = self.cfg
        out = Path(cfg.out)
        state = RunState.create(out, self.run_id, self.run_dir)
        store.point_latest(out, self.run_dir)
        prog = Progress(self.rec, f"{cfg.name} seed {cfg.seed}", cfg.time_limit, enabled=self.progress)
        interp: Interpreter | None = None
        error: KraftwerkError | None = None
        db: Any = None
        try:
            prog.start()
            db = dbs.open_db(cfg, self.run_dir, state, self.checked)
            db.setup()
            self._placed = placed(cfg, db)
            nem = None
            if cfg.has_nemesis():
                nem = Nemesis(cfg.nemesis_plan(protocol_config(cfg)), db.cluster, cfg.seed, record=step_recorder(self.rec))
            prog.phase = "running"
            prog.restart_clock()
            interp = Interpreter(
                build_generator(cfg, nem), self.rec, cfg.concurrency, client_factory(cfg, db.client_bootstrap()),
                nem.invoke if nem is not None else None, generator_rng(cfg.seed),
                op_timeout=cfg.op_timeout + 2,  # clients bound their own calls; this catches hangs
                state={}, observe=qw.observe, stop=self.stop,
            )
            self.rec.restart_clock()
            liveness.write_clock(self.run_dir, self.rec.now())
            interp.run()
            liveness.write_final_state(self.run_dir, cfg, db, self.rec.now())
            if nem is not None:
                nem.heal_all()  # belt and braces: nothing stays broken past the run
        except KraftwerkError as e:
            error = e
        except Exception as e:
            error = HarnessError(f"{type(e).__name__}: {e}")
        finally:
            prog.phase = "teardown"
            if interp is not None:
                interp.close()
            self.rec.close()
            try:
                if db is not None:
                    db.teardown()
            finally:
                state.remove()
                prog.stop()  # the live display gives the terminal back whatever teardown did
        if error is not None:
            raise error

    def schedule(self) -> list[dict[str, Any]]:
        return replay.schedule_of(read_jsonl(self.run_dir / store.HISTORY))

    def placement(self) -> dict[str, list[str]]:
        return self._placed

    def results(self, run_dir: Path | None) -> dict[str, Any]:
        if run_dir is None:
            return {"valid": "unknown", "stats": dict(self.rec.counts)}
        result = check_run(run_dir, engine=self.cfg.checker_engine, test=store.read_json(run_dir / store.TEST))
        if self.wall_s is not None:
            result.setdefault("stats", {})["wall_s"] = round(self.wall_s, 3)
        return result


def placed(cfg: TestConfig, db: Any) -> dict[str, list[str]]:
    """Each input partition's replicas as the db's observer reads them
    right after set-up (none for a db the harness does not run: it has no
    observer, and an external cluster's topics are its own)."""
    cluster = getattr(db, "cluster", None)
    obs = getattr(cluster, "observer", None)
    if obs is None:
        return {}
    return as_created((k, obs.replicas_of(k)) for k in cfg.keys())


def step_recorder(rec: Recorder) -> Callable[[str, dict[str, Any]], None]:
    """``record`` for the nemesis on real hosts: a story's step, as the
    pair the simulator records (``nemesis.stories.step_ops``), written
    together even when two steps' timers fire at once."""
    lock = threading.Lock()

    def record(f: str, value: dict[str, Any]) -> None:
        with lock:
            for v in step_ops(value):
                rec.record({"process": "nemesis", "type": "info", "f": f, "value": v})
    return record


def run_test(cfg: TestConfig, progress: bool | None = None, stop: threading.Event | None = None,
             report: bool = True) -> RunOutcome:
    """One test on real processes (``kraftwerk run``), its run directory
    under ``cfg.out`` (with the HTML report unless ``report`` is off)."""
    assert cfg.seed is not None
    checked = preflight(cfg)
    run_dir = store.new_run_dir(Path(cfg.out), cfg.name, cfg.seed)
    if cfg.db == "external" and cfg.topic_prefix == "t":
        # an external cluster outlives the run: fresh topics keep earlier runs'
        # records (same values!) out of this history
        cfg = cfg.model_copy(update={"topic_prefix": f"kraftwerk.{cfg.name}.{run_dir.name}.t"})
    return RunOutcome(run_dir, run_lifecycle(ProcessRuntime(cfg, run_dir, checked, progress, stop), run_dir,
                                             report=report))


def record_schedule(run_dir: Path, schedule: list[dict[str, Any]], placement: dict[str, list[str]]) -> None:
    """Add what the nemesis did to test.json, in the shared vocabulary, for
    ``--schedule`` (``nemesis.replay``), and the replicas each partition
    was created with, which a replay pins (kept as given when the run
    could not read them)."""
    test = store.read_json(run_dir / store.TEST)
    store.write_json(run_dir / store.TEST, {**test, "schedule": schedule, "placement": placement or test.get("placement")})


def summary_line(o: RunOutcome) -> str:
    r = o.result
    dur = r.get("durability") or {}
    parts = [f"valid={json.dumps(r.get('valid'))}"]
    for mode, d in sorted(dur.items()):
        if isinstance(d, dict):
            parts.append(f"{mode}: acked={d.get('acked')} lost={d.get('lost')}")
    if r.get("anomaly_types"):
        parts.append("anomalies=" + ",".join(map(str, r["anomaly_types"])))
    if r.get("cause"):
        parts.append(f"cause: {r['cause']}")
    line = f"{o.run_dir}: " + "  ".join(parts)
    differs = resolution_differs(_test_schedule(o.run_dir))
    return line + ("\n  " + differs_line(differs) if differs else "")


def _test_schedule(run_dir: Path) -> Any:
    try:
        return json.loads((Path(run_dir) / store.TEST).read_text()).get("schedule")
    except (OSError, ValueError, AttributeError):
        return None


def drive_sim(run: SimRun) -> None:
    """Play the test's generator (:func:`build_generator`, as for real
    processes) on the simulator's loop with the virtual-time interpreter:
    the simulated clients of each worker thread, the nemesis over the
    simulated cluster, seeded as on real processes (the test's seed)."""
    cfg = run.cfg
    nem = None
    if cfg.has_nemesis():
        nem = Nemesis(cfg.nemesis_plan(run.sim.config), run.cluster, run.seed, record=run.record_step)
    invoke: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    if nem is not None:
        def nemesis_invoke(op: dict[str, Any]) -> dict[str, Any]:
            res = nem.invoke(op)
            if (op.get("value") or {}).get("final"):
                run.healed()  # the availability checker's bound counts from here
            return res
        invoke = nemesis_invoke
    interp = VirtualInterpreter(
        build_generator(cfg, nem), run.history, cfg.concurrency, run.client,
        invoke, generator_rng(run.seed),
        op_timeout=cfg.op_timeout + 2, loop=run.sim.loop, t0_ms=run.sim.now, state={}, observe=qw.observe,
    )
    run.play(interp.start, interp.stopped)


def sim_run(cfg: TestConfig, seed: int, run_dir: Path | None = None) -> SimRun:
    """One seed's simulated test, wired to play the test's generator
    (:func:`drive_sim`); ``.run()`` plays it."""
    return SimRun(cfg, seed, run_dir, driver=drive_sim)


class SimRuntime:
    """The deterministic simulator (``harness.runtimes.sim.SimRun``): virtual
    time, simulated network, disks and clients, the test's generator played
    in virtual time; the seed's simulation is released once its results
    are taken."""

    recorded = True

    def __init__(self, cfg: TestConfig, seed: int, run_dir: Path | None) -> None:
        self.run = sim_run(cfg, seed, run_dir)
        self._results: dict[str, Any] = {}

    def test_json(self) -> dict[str, Any]:
        return {**self.run.test_json(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def play(self) -> None:
        self._results = self.run.run(release=True)

    def schedule(self) -> list[dict[str, Any]]:
        return self.run.schedule

    def placement(self) -> dict[str, list[str]]:
        return self.run.placement

    def results(self, run_dir: Path | None) -> dict[str, Any]:
        return self._results


def run_seed(cfg: TestConfig, seed: int, out: str | Path | None = None, report: bool = False) -> dict[str, Any]:
    """One seed in the simulator (``kraftwerk sim``); with ``out`` its run
    directory (and, with ``report``, the HTML report); returns the results."""
    run_dir = store.new_run_dir(out, cfg.name, seed) if out is not None else None
    res = run_lifecycle(SimRuntime(cfg, seed, run_dir), run_dir, report)
    if run_dir is not None:
        res["run_dir"] = str(run_dir)
    return res


def run_seed_safely(cfg: TestConfig, seed: int, out: str | Path | None, report: bool = False) -> dict[str, Any]:
    """:func:`run_seed` for a pool of seeds (``kraftwerk sim``, shrink,
    explore): a harness bug becomes this seed's ``unknown`` result with its
    traceback, and the other seeds go on."""
    try:
        return run_seed(cfg.for_seed(seed), seed, out, report=report)
    except Exception as e:
        return {"seed": seed, "valid": "unknown", "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(limit=12)}


def _render_quietly(run_dir: Path) -> None:
    """The HTML report, best effort: a report failure never changes the verdict."""
    try:
        render_report(run_dir)
    except Exception as e:  # noqa: BLE001 - the run's verdict is already on disk
        (run_dir / "report-error.txt").write_text(f"{type(e).__name__}: {e}\n")
