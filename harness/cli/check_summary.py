"""What ``kraftwerk check`` prints without ``--json``: the verdict, the
reading, tables of anomalies and durability, and what was left unknown.
Apart from :mod:`harness.cli.check` so that a ``--json`` check never loads
rich."""

from __future__ import annotations

import json
from typing import Any

from rich.markup import escape  # every value from the history is data, never markup
from rich.table import Table

from checkers.check import anomaly_counts
from checkers.glossary import describe
from harness.cli.output import console


def _fmt_example(ex: Any) -> str:
    """One example on one line; cycles as ``op 2 -realtime-> op 4 -ww(t-1)-> ...``."""
    if isinstance(ex, dict) and ex.get("steps"):
        parts = [f"op {ex['steps'][0]['from']}"]
        for st in ex["steps"]:
            k = f"({st['key']})" if st.get("key") is not None else ""
            parts.append(f"-{st['type']}{k}-> op {st['to']}")
        return " ".join(parts)
    return json.dumps(ex, default=str, separators=(",", ":"))


def print_summary(res: dict[str, Any], where: str) -> None:
    """The verdict of ``kraftwerk check`` as a human reads it (without ``--json``)."""
    con = console()
    v = res.get("valid")
    colour = {True: "green", False: "red"}.get(v, "yellow")
    label = {True: "VALID", False: "INVALID"}.get(v, "UNKNOWN")
    st = res.get("stats", {})
    if res.get("partial"):
        label += " (partial run)"
    con.print(f"[bold {colour}]{label}[/]  {escape(where)}  "
              f"(model {st.get('model')}, engine {st.get('engine')}, {st.get('ops', 0)} ops, "
              f"{st.get('check_seconds', 0)} s)")
    if res.get("cause"):
        con.print(f"cause: {escape(str(res['cause']))}")
    q = res.get("checkers", {}).get("queue")
    if q is not None:
        o = q.get("options") or {}
        con.print(escape(f"reading: {q.get('reading')} (sub-via {','.join(o.get('sub_via') or [])}, "
                         f"ww-deps {'on' if o.get('ww_deps') else 'off'}, txn {'on' if o.get('txn') else 'off'}; "
                         "--jepsen / --kraftwerk / --strict-cycles choose)"), highlight=False)
    allowed = set((q or {}).get("allowed_anomaly_types", []))
    counts = anomaly_counts(res)
    if res.get("anomaly_types"):
        t = Table(title="anomalies", show_edge=False)
        t.add_column("type")
        t.add_column("count", justify="right")
        t.add_column("first example")
        for typ in res["anomaly_types"]:
            exs = res["anomalies"].get(typ) or []
            n = counts.get(typ, len(exs))
            if typ.startswith("unverified-"):
                name = f"{typ} (key not verified)"
            else:
                name = f"{typ} (allowed)" if typ in allowed else typ
            t.add_row(escape(name), str(n), escape(_fmt_example(exs[0])[:160]) if exs else "")
        con.print(t)
        for typ in res["anomaly_types"]:
            about = describe(typ)
            if about:
                con.print(f"  [bold]{escape(str(typ))}[/]: {escape(about)}", highlight=False)
    dur = res.get("durability") or {}
    if any(b.get("sent") for b in dur.values()):
        t = Table(title="durability", show_edge=False)
        for c in ("acks", "sent", "acked", "lost", "rate", "95% CI", "unacked seen", "p50/p99 ms"):
            t.add_column(c, justify="right" if c != "acks" else "left", no_wrap=True)
        for name, b in dur.items():
            if not b.get("sent"):
                continue
            lo, hi = b.get("lost_rate_ci95", [0, 1])
            d = b.get("visibility_delay_ms", {})
            t.add_row(escape(str(name)), str(b["sent"]), str(b["acked"]), str(b["lost"]),
                      f"{b['lost_rate']:.4f}", f"[{lo:.4f}, {hi:.4f}]", str(b.get("unacked_visible", 0)),
                      f"{d.get('p50', 0):.1f} / {d.get('p99', 0):.1f}")
        con.print(t)
    lin = res.get("checkers", {}).get("linearizable")
    if lin is not None and lin.get("valid") is False:
        con.print(escape(f"not linearizable: key {lin.get('key')}, op {lin.get('op')}"))
    fr = res.get("checkers", {}).get("final-reads")
    if fr is not None and fr.get("incomplete_keys"):
        keys = fr["incomplete_keys"]
        shown = escape(", ".join(map(str, keys[:8])) + (" ..." if len(keys) > 8 else ""))
        con.print(f"[yellow]no completed final read: {len(keys)} key(s) unverified ({shown})[/]")
    if q is not None and q.get("cycle_search") != "complete":
        con.print(f"[yellow]cycle search: {escape(str(q.get('cycle_search')))}[/]")
    if v == "unknown" and lin is not None:
        con.print(f"[yellow]linearizability: unknown ({escape(str(lin.get('cause')))})[/]")
