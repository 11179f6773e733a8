"""KIP-966's promise, checked over random histories at the controller level.

A model tracks which brokers are *complete* (hold every record the partition
may have committed):

* the HW can advance whenever the committed ISR is at least the effective
  min ISR (KIP-966 on) or whenever there is a leader (KIP-966 off); at such a
  moment only ISR members receive the newly committed data, so
  ``complete &= ISR``;
* a broker the leader adds to the ISR has caught up to the HW: complete;
* an unclean shutdown may lose any suffix: the broker is no longer complete.

Seed 002's guarantee is that a clean or ELR election only ever picks a complete
broker. With KIP-966 off the same histories can elect an incomplete one (the
"last replica standing" loss), which the second test shows the model detects.
"""

from __future__ import annotations

import os
import random

import pytest

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.messages import NO_LEADER, AlterPartitionItem, AlterPartitionRequest, Errors

from tests.core.controllerkit import BROKERS, TP, OneController


class Run(OneController):
    def __init__(self, seed: int, kip966: bool) -> None:
        self.rnd = random.Random(seed)
        self.kip966 = kip966
        self.alive = set(BROKERS)
        super().__init__(ProtocolConfig().with_variants(kip966=kip966), seed)
        self.complete = set(BROKERS)
        self.seen_elections = 0
        self.bad_elections: list[dict] = []
        self.lkl_elections: list[dict] = []

    def alter(self, isr) -> None:
        p = self.part
        item = AlterPartitionItem(TP, p.leader_epoch, p.partition_epoch, tuple((m, self.epochs[m]) for m in isr))
        resp = self.ask(AlterPartitionRequest(p.leader, self.epochs[p.leader], 1, (item,)), p.leader)
        if resp.error == Errors.NONE and resp.results[0].error == Errors.NONE:
            self.complete |= set(isr) - set(p.isr)  # the leader only adds caught-up followers

    # -- one random step --------------------------------------------------------

    def step(self) -> None:
        p = self.part
        op = self.rnd.choice(["shrink", "expand", "fence", "unfence", "clean-restart", "unclean-restart", "crash"])
        b = self.rnd.choice(BROKERS)
        if op == "shrink" and p.leader != NO_LEADER and len(p.isr) > 1:
            victim = self.rnd.choice([m for m in p.isr if m != p.leader])
            self.alter([m for m in p.isr if m != victim])
        elif op == "expand" and p.leader != NO_LEADER:
            cands = [m for m in BROKERS if m not in p.isr and self.is_unfenced(m)]
            if cands:
                self.alter(list(p.isr) + [self.rnd.choice(cands)])
        elif op == "fence" and b in self.alive and self.is_unfenced(b):
            self.hb(b, want_fence=True)
        elif op == "unfence" and b in self.alive:
            self.hb(b)
        elif op == "clean-restart" and b in self.alive:
            if self.is_unfenced(b):
                self.shut_down(b)
            self.register(b, self.epochs[b])
        elif op in ("unclean-restart", "crash"):
            # power loss: the broker may have lost any suffix of its log
            self.complete.discard(b)
            if self.is_unfenced(b):
                # its session lapses while it is down: the controller refuses
                # a new incarnation until then (DUPLICATE_BROKER_REGISTRATION)
                self.hb(b, want_fence=True)
            self.register(b, -1)
        self.observe()

    def shut_down(self, b: int) -> None:
        """A controlled shutdown, the other unfenced brokers heartbeating
        (reporting their metadata offsets) until ``b`` may stop."""
        for _ in range(5):
            if self.hb(b, want_shutdown=True).should_shut_down:
                return
            for o in BROKERS:
                if o != b and self.is_unfenced(o) and not self.ctl.image.brokers[o].in_controlled_shutdown:
                    self.hb(o)
        raise AssertionError(f"broker {b} was never allowed to shut down")

    def is_unfenced(self, b: int) -> bool:
        reg = self.ctl.image.brokers.get(b)
        return reg is not None and not reg.fenced

    def observe(self) -> None:
        elections = self.elections()
        for ev in elections[self.seen_elections :]:
            if ev["data_kind"] == "last-known-leader":
                # seed 002 "Delivery plan": with no ISR or ELR member left the
                # LastKnownLeader leads even after an unclean shutdown (its lost
                # tail is the documented fsync trade-off); from here on its log
                # is what the partition has committed
                self.lkl_elections.append(ev)
                self.complete = {ev["leader"]}
                continue
            assert ev["data_kind"] in ("clean", "elr")  # unclean election is off in these runs
            if ev["leader"] not in self.complete:
                self.bad_elections.append(dict(ev, complete=sorted(self.complete)))
        self.seen_elections = len(elections)
        p = self.part
        # at any moment the HW may advance: only the ISR keeps up with it
        hw_can_advance = p.leader != NO_LEADER and (len(p.isr) >= 2 if self.kip966 else True)
        if hw_can_advance:
            self.complete &= set(p.isr)
        # structural invariants of seed 002
        assert not set(p.elr) & set(p.isr)
        assert not p.elr or len(p.isr) < 2
        assert p.leader == NO_LEADER or p.leader in p.isr
        if not self.kip966:
            assert p.elr == () and p.last_known_elr == () and p.isr


SEEDS = int(os.environ.get("ELR_SEEDS", "25"))


@pytest.mark.parametrize("seed", range(SEEDS))
def test_with_kip966_clean_and_elr_elections_only_pick_complete_replicas(seed):
    run = Run(seed, kip966=True)
    for _ in range(60):
        run.step()
    assert run.bad_elections == []


def test_without_kip966_the_model_catches_an_incomplete_leader_election():
    """The same random histories without KIP-966 elect a replica that lost
    committed data in at least one seed: the last-replica-standing loss."""
    found = []
    for seed in range(SEEDS):
        run = Run(seed, kip966=False)
        for _ in range(60):
            run.step()
        found += run.bad_elections
    assert found, "expected the classic protocol to elect an incomplete replica somewhere"
