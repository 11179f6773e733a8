"""One test's lifecycle, Jepsen's order:

setup (state file, run directory) -> start db -> run generator (client ops with
the nemesis schedule interleaved) -> final generator (heal every fault, let the
cluster recover, final reads) -> teardown (stop nodes, keep their logs) -> check
(results.json) -> report (index.html, plots).

Whatever happens in the middle, teardown runs and the state file is removed
only after every process it lists is gone.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import generator as g
from checkers.history import read_jsonl
from harness import store
from harness.backend.local import CAPABILITIES as LOCAL_CAPABILITIES
from harness.checking import check_run, export_edn
from harness.config import TestConfig
from harness.errors import HarnessError, KraftwerkError, UsageError
from harness.history import Recorder
from harness.interpreter import Interpreter
from harness.progress import Progress
from harness.state import RunState
from harness.summary import write_summary
from nemesis import Nemesis, replay
from nemesis.control import Unsupported
from nemesis.faults import check_supported
from reference_impl.sim.control import CAPABILITIES as SIM_CAPABILITIES
from workloads import queue as qw
from workloads import txn as tw


@dataclass
class RunOutcome:
    run_dir: Path
    result: dict[str, Any]


def make_db(cfg: TestConfig, run_dir: Path, state: RunState, checked: Any = None) -> Any:
    if cfg.db == "kafka":
        from harness.db.kafka import KafkaDB

        hosts = None
        if cfg.backend != "local":
            from harness.backend import open_hosts

            hosts = open_hosts(cfg, run_dir, state, checked)
        return KafkaDB(cfg, run_dir, state, hosts)
    if cfg.backend != "local":
        from harness.backend import open_hosts
        from harness.db.hosted import HostedReference
        from harness.db.reference import node_settings

        return HostedReference(cfg, run_dir, state, open_hosts(cfg, run_dir, state, checked), node_settings(cfg))
    if cfg.db == "external":
        from harness.db.external import ExternalDB

        return ExternalDB(cfg)
    from harness.db.reference import ReferenceDB

    return ReferenceDB(cfg, run_dir, state)


def preflight(cfg: TestConfig) -> Any:
    """Checks that need the machine but start nothing (faults the runtime
    can make, ports free, binaries present, the backend's hosts reachable);
    returns what the backend checked."""
    have = LOCAL_CAPABILITIES if cfg.backend == "local" else SIM_CAPABILITIES if cfg.backend == "sim" else None
    if have is None and cfg.db == "reference":
        from harness.db.hosted import capabilities_for

        have = capabilities_for(cfg)
    if have is not None:
        try:
            check_supported(cfg.fault_names(), cfg.backend, have)
        except Unsupported as e:
            raise UsageError(str(e)) from None
    if cfg.backend == "sim":
        return None
    if cfg.db == "kafka":
        from harness.db.kafka import preflight as kafka_preflight

        kafka_preflight(cfg)
    if cfg.backend != "local":
        from harness.backend import preflight as backend_preflight

        return backend_preflight(cfg)
    if cfg.db == "reference":
        from harness.db.reference import preflight as ref_preflight

        ref_preflight(cfg)


def workload_generator(cfg: TestConfig) -> g.Gen:
    """The client operations of ``cfg.workload``, unbounded."""
    keys = cfg.keys()
    if cfg.workload == "txn":
        return tw.txn_generator(keys, cfg.max_txn_length, cfg.abort_probability)
    return qw.workload_generator(keys, cfg.acks_for_thread, idempotent_for_thread=cfg.idempotent_for_thread)


def client_factory(cfg: TestConfig, bootstrap: str) -> Callable[[int, int], Any]:
    """Builds the client of a (thread, process) for ``cfg.workload``."""
    keys = cfg.keys()

    def client(thread: int, process: int) -> Any:
        if cfg.workload == "txn":
            # the thread's transactional id: a replacement fences its predecessor
            return tw.TxnClient(bootstrap, keys, process, cfg.op_timeout, f"kraftwerk-{cfg.name}-{thread}",
                                cfg.final_read_timeout, cfg.isolation_level)
        return qw.QueueClient(
            bootstrap, keys, cfg.acks_for_thread(thread), process, cfg.op_timeout, cfg.final_read_timeout,
            idempotent=cfg.idempotent_for_thread(thread), isolation_level=cfg.isolation_level,
        )

    return client


def build_generator(cfg: TestConfig, nem: Any | None) -> g.Gen:
    keys = cfg.keys()
    limit = cfg.time_limit
    if cfg.scenario:  # clients keep writing for the whole script
        from nemesis.scenarios import duration

        limit = max(limit, duration(cfg.scenario))
    client_gen = g.clients(g.time_limit(limit, g.rate(cfg.rate, workload_generator(cfg))))
    main = client_gen
    if nem is not None:
        sched = nem.schedule() if cfg.scenario else g.time_limit(limit, nem.schedule())
        main = g.any_(client_gen, g.nemesis(sched))
    parts: list[Any] = [main]
    if nem is not None:
        parts.append(g.nemesis(nem.final()))
        parts.append(g.sleep(nem.recovery_seconds()))
    parts.append(qw.final_generator(keys, cfg.concurrency, cfg.final_read_timeout))
    return g.phases(*parts)


def run_test(cfg: TestConfig, progress: bool | None = None, stop: threading.Event | None = None) -> RunOutcome:
    assert cfg.seed is not None
    checked = preflight(cfg)
    out = Path(cfg.out)
    run_dir = store.new_run_dir(out, cfg.name, cfg.seed)
    run_id = f"{cfg.name}-{run_dir.name}"
    if cfg.db == "external" and cfg.topic_prefix == "t":
        # an external cluster outlives the run: fresh topics keep earlier runs'
        # records (same values!) out of this history
        cfg = cfg.model_copy(update={"topic_prefix": f"kraftwerk.{cfg.name}.{run_dir.name}.t"})
    state = RunState.create(out, run_id, run_dir)
    store.write_json(run_dir / store.TEST, {"run_id": run_id, **cfg.test_json()})
    store.point_latest(out, run_dir)
    rng = random.Random(cfg.seed)
    rec = Recorder(run_dir / store.HISTORY if cfg.record_history else None, cfg.history_fsync_every)
    prog = Progress(rec, f"{cfg.name} seed {cfg.seed}", cfg.time_limit, enabled=progress)
    interp: Interpreter | None = None
    error: KraftwerkError | None = None
    db: Any = None
    try:
        prog.start()
        db = make_db(cfg, run_dir, state, checked)
        db.setup()
        nem = None
        if cfg.has_nemesis():
            from harness.db.reference import protocol_config

            nem = Nemesis(cfg.nemesis_plan(protocol_config(cfg)), db.cluster, random.Random(rng.getrandbits(64)))
        client = client_factory(cfg, db.client_bootstrap())
        prog.phase = "running"
        prog.restart_clock()
        interp = Interpreter(
            build_generator(cfg, nem),
            rec,
            cfg.concurrency,
            client,
            nem.invoke if nem is not None else None,
            random.Random(rng.getrandbits(64)),
            op_timeout=cfg.op_timeout + 2,  # clients bound their own calls; this catches hangs
            state={},
            observe=qw.observe,
            stop=stop,
        )
        rec.restart_clock()
        interp.run()
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
        rec.close()
        try:
            if db is not None:
                db.teardown()
        finally:
            state.remove()
        prog.stop()
    if error is not None:
        (run_dir / "error.txt").write_text(str(error) + "\n")
        raise error
    if not cfg.record_history:
        return RunOutcome(run_dir, {"valid": "unknown", "stats": dict(rec.counts)})
    record_schedule(run_dir, replay.schedule_of(read_jsonl(run_dir / store.HISTORY)))
    result = check_run(run_dir, engine=cfg.checker_engine, test=store.read_json(run_dir / store.TEST))
    export_edn(run_dir)
    write_summary(run_dir)
    try:
        from harness.report import render_report

        render_report(run_dir)
    except Exception as e:  # the verdict stands even if a plot fails
        (run_dir / "report-error.txt").write_text(f"{type(e).__name__}: {e}\n")
    return RunOutcome(run_dir, result)


def record_schedule(run_dir: Path, schedule: list[dict[str, Any]]) -> None:
    """Add what the nemesis did to test.json, in the shared vocabulary, for
    ``--schedule`` (``nemesis.replay``)."""
    test = store.read_json(run_dir / store.TEST)
    store.write_json(run_dir / store.TEST, {**test, "schedule": schedule})


def summary_line(o: RunOutcome) -> str:
    r = o.result
    dur = r.get("durability") or {}
    parts = [f"valid={json.dumps(r.get('valid'))}"]
    for mode, d in sorted(dur.items()):
        if isinstance(d, dict):
            parts.append(f"{mode}: acked={d.get('acked')} lost={d.get('lost')}")
    if r.get("anomaly_types"):
        parts.append("anomalies=" + ",".join(map(str, r["anomaly_types"])))
    return f"{o.run_dir}: " + "  ".join(parts)


def run_seed(cfg: TestConfig, seed: int, out: str | Path | None = None, report: bool = False) -> dict[str, Any]:
    """Run one simulated seed (``harness.backend.sim.SimRun``); with
    ``out`` write its run directory (test.json, results.json and, with
    ``report``, the HTML report) and return the results."""
    from harness.backend.sim import SimRun

    run_dir = store.new_run_dir(out, cfg.name, seed) if out is not None else None
    run = SimRun(cfg, seed, run_dir)
    if run_dir is not None:
        test = {**run.test_json(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        store.write_json(run_dir / store.TEST, test)
    res = run.run(release=True)
    if run_dir is not None:
        record_schedule(run_dir, run.schedule)
        store.write_json(run_dir / store.RESULTS, res)
        write_summary(run_dir)
        res["run_dir"] = str(run_dir)
        if report:
            _render_quietly(run_dir)
    return res


def _render_quietly(run_dir: Path) -> None:
    """The HTML report, best effort: a report failure never changes the verdict."""
    try:
        from harness.report import render_report

        render_report(run_dir)
    except Exception as e:  # noqa: BLE001 - the run's verdict is already on disk
        (run_dir / "report-error.txt").write_text(f"{type(e).__name__}: {e}\n")
