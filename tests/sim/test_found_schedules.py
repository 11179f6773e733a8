"""Fault schedules the search tools found losing acknowledged writes with the
protocol at Kafka 4.4's defaults, kept as replays of the rule each broke
(tests/sim/schedules/, recorded test.json files without their output path).

* ``power-loss-restart-within-session-clock-jump``: a broker lost power,
  restarted within its old session (so its registration was refused as a
  duplicate) and had its wall clock run 50 s ahead while it was refused.
  Its retry waited on the wall clock, so after the clock came back it never
  registered: the controller kept counting its lost log in the ISR and
  later elected it with nothing. BrokerLifecycleManager schedules the retry
  on the monotonic clock.
* ``quorum-leader-resigns-with-observer-clock-back``: the quorum leader
  resigned by check-quorum (its clock jumped forward) holding a broker's
  parked metadata fetch, as that broker's clock went back 49 s. The fetch
  was dropped, the broker waited out its own resend on the wall clock with
  stale metadata, and as partition leader never took caught-up followers
  back into the ISR: the last acknowledged write stayed above a HW held
  below min ISR. KafkaRaftClient answers its fetch purgatory
  NOT_LEADER_OR_FOLLOWER when it steps down.
* ``power-loss-after-kills-no-controller-fenced`` (``kraftwerk sim --seed 21
  --nemesis all --swarm``, shrunk from 91 faults to 9): kills of every
  broker, then the controllers changed leader over and over, each
  failover renewing the old incarnations' sessions, so no restarted broker
  registered and the metadata kept listing all three in every ISR. The
  nemesis's budget of one unclean failure at a time read those stale ISRs
  as "back in sync" and let a broker lose power: two unclean shutdowns
  with min ISR 2, beyond KIP-966's MinISR-1 tolerance (seed 002), and the
  last known leader, elected with nothing, lost every acknowledged write
  by design. Not a protocol fault: a broker counts as back once its
  running incarnation has registered (the Observer's ``broker_epoch``).
* ``terminated-brokers-outlast-their-grace`` (``kraftwerk sim --seed 308
  --nemesis all --swarm``, shrunk from 85 faults to 5): two brokers shut
  down cleanly near the end of the load were still in their controlled
  shutdown when the fault stopped and at the final heal, so neither
  restarted them; the grace kill took them 30 s later and they stayed
  down. The last broker, alone in the ISR below min ISR, could not advance
  its high watermark over an acknowledged write, which the final read
  therefore never saw. A terminate's stop now starts each node it shut
  down once that node is down.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli.options import config_from_flags
from harness.lifecycle.runner import run_seed

SCHEDULES = Path(__file__).parent / "schedules"


@pytest.mark.parametrize("name", [
    "power-loss-restart-within-session-clock-jump",
    "quorum-leader-resigns-with-observer-clock-back",
    "terminated-brokers-outlast-their-grace",
])
def test_a_found_schedule_replays_without_losing_an_acknowledged_write(name: str, tmp_path: Path):
    cfg = config_from_flags("sim", {"schedule": str(SCHEDULES / f"{name}.json"), "out": str(tmp_path)})
    res = run_seed(cfg, cfg.seed, tmp_path)
    durability = res["durability"]["acks=all"]
    assert durability["acked"] > 0 and durability["lost"] == 0
    assert res["valid"] is True, res.get("anomaly_types")


def test_a_power_loss_waits_while_a_killed_brokers_new_incarnation_has_not_registered(tmp_path: Path):
    """The recorded power loss is refused on replay (every killed broker's
    new incarnation still waits to register), and nothing acknowledged is
    lost; before the Observer showed registrations it went ahead."""
    cfg = config_from_flags("sim", {"schedule": str(SCHEDULES / "power-loss-after-kills-no-controller-fenced.json"),
                                    "out": str(tmp_path)})
    res = run_seed(cfg, cfg.seed, tmp_path)
    durability = res["durability"]["acks=all"]
    assert durability["acked"] > 0 and durability["lost"] == 0
    assert res["valid"] is True, res.get("anomaly_types")
    test = json.loads(next(tmp_path.rglob("test.json")).read_text())
    power = [e for e in test["schedule"] if e["f"] == "start-lose-unfsynced"]
    assert power and all(e["nodes"] == [] and "not back in sync" in e["skipped"] for e in power)


def test_seed_308_broker_hears_no_metadata_for_its_clock_jump_after_a_lost_fetch(tmp_path: Path):
    """The stall seen in seed 308, pinned as the faithful behaviour it is
    (docs/architecture.md, "Clocks", the KRaft request timeout): broker n3's
    wall clock ran 55.1 s ahead, its metadata fetch timed out on that clock
    and its next fetch went out while the partition still cut it from the
    controllers, so the simulated network dropped it. When the clock was set
    back, that fetch stayed in flight until the wall clock reached its send
    time plus the request timeout again, as Kafka's RequestManager and
    NetworkClient judge it (``time.milliseconds()``): n3 knew no quorum
    leader for the length of the jump, in virtual time. The load runs 70 s
    so that the run outlasts the jump (its final reads, done once they
    have read each key, would end it sooner)."""
    cfg = config_from_flags("sim", {"schedule": str(SCHEDULES / "terminated-brokers-outlast-their-grace.json"),
                                    "out": str(tmp_path), "time_limit": 70})
    run_seed(cfg, cfg.seed, tmp_path)
    trace = next(tmp_path.rglob("nodes/n3/trace.jsonl"))
    states = [e for e in map(json.loads, trace.read_text().splitlines()) if e["kind"] == "raft_state"]
    lost = next(i for i, e in enumerate(states) if e["leader"] == -1 and e["t"] > 0 and e["epoch"] > 0)
    found = next(e for e in states[lost + 1:] if e["leader"] != -1)
    assert 55_101 <= found["t"] - states[lost]["t"] < 55_101 + 3 * 2_000
