"""The Starlette application behind ``kraftwerk serve``.

Routes (GET and HEAD only; anything else is 405):

- ``/``: the index of runs and campaigns, filtered, sorted and paged on the
  server (``q``, ``verdict``, ``runtime``, ``sort``, ``order``, ``page``), so
  it stays small with thousands of runs; ``/api/runs`` gives the same rows
  as JSON.
- ``/r/<path>``: a file under the results directory. A run directory shows
  its report (``index.html``, rendered on first view for runs made without
  one), a campaign directory its page, any other directory a listing.
- ``/ls/<path>``: a directory's listing (a run's files).
- ``/zip/<path>``: a run directory as a zip, streamed and bounded
  (:mod:`harness.site.zipstream`).

Every path goes through :func:`harness.site.paths.safe_path`; every page is
Jinja2 with autoescaping, and every response forbids scripts (a report holds
none) and content sniffing. Every endpoint is a plain function, which
Starlette runs in a worker thread: what a request reads from disk (a large
report, a listing, a stat on a slow disk) holds that thread, never the event
loop every other request waits on.
"""

from __future__ import annotations

import ipaddress
import math
import mimetypes
import os
import socket
import threading
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote, urlencode

from jinja2 import ChoiceLoader, Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from harness.errors import UsageError
from harness.rundir.trust import trusted_dir

from .paths import Refused, rel_of, safe_path, servable
from .scan import RUN_MARKERS, Catalogue
from .zipstream import TooLarge, ZipGate, ZipLimits, ZipResponse, manifest, zip_chunks
from harness.report import render_report
from harness.report.campaign import (CampaignError, campaign_context, cell_dir, heatmap_png, live, load_campaign,
                                     state)
from harness.report.render import VERSION_MARK
from reference_impl.server.addresses import bind_addresses

PAGE = 100
SORTS = ("started", "name", "duration", "db", "backend", "nemesis", "verdict", "lost")
HEADERS = {"Content-Security-Policy": "default-src 'self'; script-src 'none'; style-src 'self' 'unsafe-inline'; "
                                      "img-src 'self' data:; frame-ancestors 'none'",
           "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
TEXT_TYPES = {".jsonl": "text/plain", ".log": "text/plain", ".edn": "text/plain", ".txt": "text/plain",
              ".json": "application/json", ".yaml": "text/plain", ".yml": "text/plain"}
NAV_MARK = "<body>"

_env = Environment(
    loader=ChoiceLoader([PackageLoader("harness.site", "templates"), PackageLoader("harness.report", "templates")]),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True, lstrip_blocks=True,
)


def _verdict(s: dict[str, Any]) -> str:
    v = s.get("valid")
    if v is True:
        return "valid"
    if v is False:
        return "invalid"
    return s.get("state") if s.get("state") in ("running", "error") else "unknown"


def _row(s: dict[str, Any], cells: dict[tuple[str, str], str] | None = None,
         names: dict[str, str] | None = None) -> dict[str, Any]:
    """One index row, every field a plain value (the template escapes). A
    campaign's run is named by its cell's parameters, not its directory."""
    dur_all = s.get("durability") or {}
    d = dur_all.get("acks=all") or {}
    dur = s.get("duration_s")
    camp = s.get("campaign")
    cell = None
    if camp and cells is not None:
        cell = cells.get((camp, s["path"][len(camp) + 1:].split("/", 1)[0]))
    levels = [{"level": str(m), "lost": int(x.get("lost") or 0), "acked": int(x.get("acked") or 0)}
              for m, x in sorted(dur_all.items(), key=lambda mx: (mx[0] != "acks=all", mx[0]))
              if isinstance(x, dict) and x.get("acked")]
    return {"path": s["path"], "name": str(s.get("name", "")), "started": str(s.get("started", "")),
            "duration": dur if isinstance(dur, (int, float)) else None,
            "runtime": str(s.get("runtime") or ""), "db": str(s.get("db") or ""),
            "backend": str(s.get("backend") or ""), "nemesis": _nemesis(s),
            "verdict": _verdict(s), "acked": d.get("acked"), "lost": d.get("lost"), "levels": levels,
            "lost_any": sum(x["lost"] for x in levels),
            "anomalies": [str(t) for t in s.get("anomaly_types") or []],
            "campaign": camp, "campaign_name": (names or {}).get(camp or "", camp), "cell": cell,
            "seed": s.get("seed")}


def _nemesis(s: dict[str, Any]) -> str:
    nem = [str(x) for x in s.get("nemesis") or []]
    if not nem:
        return "none"
    return ", ".join(nem) if len(nem) <= 6 else ", ".join(nem[:5]) + f" +{len(nem) - 5}"


def _sort_key(sort: str) -> Any:
    order = {"invalid": 0, "unknown": 1, "error": 1, "running": 2, "valid": 3}
    return {
        "started": lambda r: r["started"], "name": lambda r: (r["name"], r["started"]),
        "duration": lambda r: r["duration"] if r["duration"] is not None else -1.0,
        "db": lambda r: r["db"], "backend": lambda r: r["backend"], "nemesis": lambda r: r["nemesis"],
        "verdict": lambda r: (order.get(r["verdict"], 1), r["started"]),
        "lost": lambda r: (r["lost_any"], r["acked"] or 0),
    }[sort]


def _matches(r: dict[str, Any], q: str, verdict: str, runtime: str) -> bool:
    if verdict and r["verdict"] != verdict:
        return False
    if runtime and r["runtime"] != runtime:
        return False
    if q:
        hay = " ".join([r["name"], r["path"], r["db"], r["backend"], r["nemesis"], r["runtime"],
                        " ".join(r["anomalies"]), str(r["campaign"] or ""), str(r["cell"] or "")]).lower()
        return all(w in hay for w in q.lower().split())
    return True


class Site:
    """The results directory, its catalogue and the locks that keep two
    requests from rendering one run's report at once."""

    def __init__(self, root: Path, zip_limits: ZipLimits = ZipLimits()) -> None:
        self.shown_root = str(root)  # as the user named it
        self.zips = ZipGate(zip_limits)
        self.root = root.resolve()
        self.catalogue = Catalogue(self.root)
        self._render_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._heatmaps: dict[str, tuple[Any, bytes]] = {}
        self._campaign_files: dict[str, tuple[int, dict[str, Any]]] = {}

    def render_lock(self, path: Path) -> threading.Lock:
        with self._lock:
            return self._render_locks.setdefault(str(path), threading.Lock())

    # -- index ---------------------------------------------------------------------------------------------
    def index(self, request: Request) -> Response:
        p = request.query_params
        q, verdict, runtime = p.get("q", "").strip(), p.get("verdict", ""), p.get("runtime", "")
        sort = p.get("sort", "started") if p.get("sort") in SORTS else "started"
        desc = p.get("order", "desc") != "asc"
        runs, campaigns = self.catalogue.scan()
        live = self.live_campaigns(runs, campaigns)
        cells = {(c["path"], d): label for c in live for d, label in c["cell_labels"].items()}
        names = {c["path"]: c["name"] for c in live}
        rows = [_row(s, cells, names) for s in runs]
        runtimes = sorted({r["runtime"] for r in rows if r["runtime"]})
        counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in ("valid", "invalid", "unknown")}
        shown = [r for r in rows if _matches(r, q, verdict, runtime)]
        shown.sort(key=_sort_key(sort), reverse=desc)
        pages = max(1, math.ceil(len(shown) / PAGE))
        try:
            page = min(max(1, int(p.get("page", "1"))), pages)
        except ValueError:
            page = 1
        base = {"q": q, "verdict": verdict, "runtime": runtime}

        def url(**kw: Any) -> str:
            args = {**base, "sort": sort, "order": "desc" if desc else "asc", "page": page, **kw}
            return "/?" + urlencode({k: v for k, v in args.items() if v not in ("", None)})

        def sort_url(col: str) -> str:
            same = col == sort
            return url(sort=col, order=("asc" if desc else "desc") if same else
                       ("asc" if col in ("name", "db", "backend", "nemesis") else "desc"), page=1)

        if request.url.path == "/api/runs":
            return JSONResponse({"total": len(rows), "matched": len(shown), "page": page, "pages": pages,
                                 "runs": shown[(page - 1) * PAGE: page * PAGE]}, headers=HEADERS)
        camp_rows = [c["row"] for c in live]
        body = _env.get_template("site_index.html.j2").render(
            root=self.shown_root, rows=shown[(page - 1) * PAGE: page * PAGE], total=len(rows), matched=len(shown),
            page=page, pages=pages, first=(page - 1) * PAGE + 1 if shown else 0, last=min(page * PAGE, len(shown)),
            q=q, verdict=verdict, runtime=runtime, runtimes=runtimes, sort=sort, desc=desc, counts=counts,
            url=url, sort_url=sort_url, campaigns=camp_rows, qp=lambda s: quote(s))
        return HTMLResponse(body, headers=HEADERS)

    def load_campaign(self, d: str | Path) -> dict[str, Any]:
        """campaign.json, kept until it changes (a CampaignError if bad)."""
        stamp = os.stat(Path(d) / "campaign.json").st_mtime_ns
        cached = self._campaign_files.get(str(d))
        if cached is None or cached[0] != stamp:
            cached = self._campaign_files[str(d)] = (stamp, load_campaign(d))
        return cached[1]

    def live_campaigns(self, runs: list[dict[str, Any]], campaigns: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each campaign as its runs on disk say now (counted while it runs,
        and a run added since it ended counted too), with its index row and
        each cell directory's label (its parameters)."""
        out = []
        for c in campaigns:
            base = c["path"] + "/"
            try:
                camp = self.load_campaign(c["dir"])
            except (CampaignError, OSError) as e:
                out.append({"path": c["path"], "name": c["path"], "cell_labels": {}, "campaign": None,
                            "row": {"path": c["path"], "name": c["path"], "error": str(e), "cells": 0, "runs": 0,
                                    "invalid": 0}})
                continue
            camp = live(camp, {r["path"][len(base):]: r for r in runs if r.get("campaign") == c["path"]})
            cells = camp["cells"]
            labels = {cell_dir(x): ", ".join(f"{k}={v}" for k, v in (x.get("params") or {}).items()) or str(x.get("id"))
                      for x in cells if cell_dir(x)}
            name = str(camp.get("name") or c["path"])
            row = {"path": c["path"], "name": name, "created": str(camp.get("created", "")),
                   "parameters": " × ".join(map(str, camp.get("parameters") or [])), "cells": len(cells),
                   "runs": sum(int(x.get("runs") or 0) for x in cells), "planned": camp.get("planned_runs"),
                   "invalid": sum(int(x.get("invalid") or 0) for x in cells), "error": None, "state": state(camp)}
            out.append({"path": c["path"], "name": name, "cell_labels": labels, "campaign": camp, "row": row})
        return out

    def live_campaign(self, d: Path) -> dict[str, Any]:
        """One campaign directory, live (CampaignError if its file is bad)."""
        rel = rel_of(self.root, d)
        runs, campaigns = self.catalogue.scan()
        (c,) = [c for c in self.live_campaigns(runs, campaigns) if c["path"] == rel] or [{"campaign": None}]
        if c["campaign"] is None:
            raise CampaignError(c.get("row", {}).get("error") or f"{rel}: not a campaign")
        return c["campaign"]

    # -- files ---------------------------------------------------------------------------------------------
    def files(self, request: Request) -> Response:
        rel = request.path_params.get("path", "")
        try:
            path = safe_path(self.root, rel)
        except Refused:
            return self.not_found(rel)
        if path.is_dir():
            if not request.url.path.endswith("/"):
                return RedirectResponse(quote(f"/r/{rel}/"), status_code=308, headers=HEADERS)
            if (path / "campaign.json").is_file():
                return self.campaign(path)
            if any((path / m).is_file() for m in RUN_MARKERS):
                return self.run_page(path)
            if (path / "index.html").is_file():  # a page of its own (a torture run's)
                return self.file(path / "index.html")
            return self.listing(path)
        return self.file(path)

    def file(self, path: Path) -> Response:
        mt = TEXT_TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if mt.startswith("text/"):
            mt += "; charset=utf-8"
        if path.suffix == ".html":
            # the run's report gets the site's bar (its own links are relative and stay as they are)
            text = path.read_text(encoding="utf-8", errors="replace")
            return HTMLResponse(self._with_nav(text, path), headers=HEADERS)
        return FileResponse(path, media_type=mt, headers=HEADERS, content_disposition_type="inline")

    def _with_nav(self, text: str, path: Path) -> str:
        run = path.parent
        rel = rel_of(self.root, run)
        nav = _env.get_template("nav.html.j2").render(
            crumb=rel, zip=f"/zip/{quote(rel)}" if any((run / m).is_file() for m in RUN_MARKERS) else None,
            files=f"/ls/{quote(rel)}/" if rel else "/ls/")
        return text.replace(NAV_MARK, NAV_MARK + nav, 1)

    def run_page(self, run: Path) -> Response:
        index = run / "index.html"
        stale = _stale(run)
        if stale and (run / "history.jsonl").is_file():
            err = self._render(run)
            if err and not index.is_file():
                return self.page("No report", f"This run has no report and it could not be rendered here: {err}. "
                                 f"Run `kraftwerk report {rel_of(self.root, run)}`.", 503, run)
        if not index.is_file():
            return self.listing(run)
        return self.file(index)

    def _render(self, run: Path) -> str | None:
        try:
            trusted_dir(run, "kraftwerk serve", create=False)  # the report is written into it
        except UsageError as e:
            return str(e)
        with self.render_lock(run):
            if not _stale(run):
                return None  # another request rendered it meanwhile
            try:
                render_report(run)
            except Exception as e:  # noqa: BLE001 - shown on the page, one line
                return f"{type(e).__name__}: {e}"
        return None

    def campaign(self, d: Path) -> Response:
        try:
            c = self.live_campaign(d)
        except CampaignError as e:
            return self.page("Campaign", str(e), 500, d)
        rel = rel_of(self.root, d)
        body = _env.get_template("campaign.html.j2").render(
            heatmap=f"/heatmap/{quote(rel)}", run_href=lambda r: "/r/" + quote(_join(rel, r)) + "/",
            **campaign_context(c))
        return HTMLResponse(self._with_nav(body, d / "index.html"), headers=HEADERS)

    def heatmap(self, request: Request) -> Response:
        rel = request.path_params.get("path", "")
        try:
            d = safe_path(self.root, rel)
            camp = self.live_campaign(d)
        except (Refused, OSError, CampaignError):
            return self.not_found(rel)
        # drawn again only when a cell's counts changed
        stamp = repr([(c.get("id"), c.get("runs"), c.get("invalid"), c.get("durability")) for c in camp["cells"]])
        cached = self._heatmaps.get(str(d))
        if cached is None or cached[0] != stamp:
            png = heatmap_png(camp)
            cached = self._heatmaps[str(d)] = (stamp, png)
        return Response(cached[1], media_type="image/png", headers=HEADERS)

    def listing(self, d: Path) -> Response:
        rel = rel_of(self.root, d) if d != self.root else ""
        entries = []
        for e in sorted(os.scandir(d), key=lambda e: (not e.is_dir(), e.name)):
            if e.name.startswith(".") or not (e.is_dir() or servable(Path(e.path))):
                continue
            try:
                st = e.stat()
            except OSError:
                continue  # a dangling symlink
            href = "/r/" + quote(_join(rel, e.name)) + ("/" if e.is_dir() else "")
            entries.append({"name": e.name + ("/" if e.is_dir() else ""), "href": href,
                            "size": "" if e.is_dir() else _size(st.st_size)})
        parent = "/ls/" + quote(rel.rsplit("/", 1)[0]) + "/" if "/" in rel else ("/ls/" if rel else None)
        body = _env.get_template("listing.html.j2").render(rel=rel or ".", entries=entries, parent=parent)
        return HTMLResponse(self._with_nav(body, d / "x"), headers=HEADERS)

    def ls(self, request: Request) -> Response:
        rel = request.path_params.get("path", "")
        try:
            d = safe_path(self.root, rel)
        except Refused:
            return self.not_found(rel)
        return self.listing(d) if d.is_dir() else self.not_found(rel)

    # -- zip -----------------------------------------------------------------------------------------------
    def zip(self, request: Request) -> Response:
        rel = request.path_params.get("path", "")
        try:
            d = safe_path(self.root, rel)
        except Refused:
            return self.not_found(rel)
        if not d.is_dir() or not any((d / m).is_file() for m in RUN_MARKERS):
            return self.not_found(rel)
        if not self.zips.enter():
            return self.page("Busy", f"{self.zips.limits.concurrent} zips are being made already; "
                             "try again in a few seconds.", 503, None, {"Retry-After": "5"})
        try:
            entries = manifest(self.root, d, self.zips.limits)
        except TooLarge as e:
            self.zips.leave()
            return self.page("Too large to zip", str(e), 413, None)
        except BaseException:
            self.zips.leave()
            raise
        name = f"{d.parent.name}-{d.name}.zip"
        if request.method == "HEAD":  # what a GET would answer, without making the zip
            self.zips.leave()
            return Response(b"", media_type="application/zip", headers=HEADERS)
        return ZipResponse(zip_chunks(entries), name, HEADERS, self.zips.leave)

    # -- errors --------------------------------------------------------------------------------------------
    def not_found(self, rel: str) -> Response:
        return self.page("Not found", f"Nothing to serve at {rel!r} under the results directory.", 404, None)

    def page(self, title: str, message: str, status: int, d: Path | None,
             extra: dict[str, str] | None = None) -> Response:
        body = _env.get_template("message.html.j2").render(title=title, message=message)
        return HTMLResponse(body, status_code=status, headers={**HEADERS, **(extra or {})})


def _stale(run: Path) -> bool:
    """A run's report is missing, older than its results.json (re-checked
    since) or made by an older report (no current version mark)."""
    index, res = run / "index.html", run / "results.json"
    try:
        with open(index, encoding="utf-8", errors="replace") as f:
            head = f.read(600)
        if VERSION_MARK not in head:
            return True
        return res.is_file() and index.stat().st_mtime < res.stat().st_mtime
    except OSError:
        return True


def _join(a: str, b: str) -> str:
    return f"{a}/{b}" if a else b


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def allowed_hosts(host: str, addresses: Sequence[str], extra: Sequence[str] = ()) -> list[str]:
    """Host headers answered: the names the site is bound to, never any
    (a web page elsewhere cannot rebind a name of its own to one of our
    addresses and read the results, DNS rebinding): loopback names; the
    ``addresses`` the site listens on (those ``host`` resolved to when it was
    checked and bound: resolved once, never again here) and ``host`` itself;
    for a wildcard bind (``0.0.0.0``, ``::``) this machine's name and every
    address of its interfaces; and ``extra`` (``kraftwerk serve
    --allow-host``: a DNS name the site is reached by)."""
    names = {"127.0.0.1", "localhost", "[::1]", "::1", host.lower()}
    ips = {ip.split("%", 1)[0] for ip in addresses}
    if ips & {"0.0.0.0", "::"}:
        ips |= _local_addresses()
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    names |= {f"[{ip}]" if ":" in ip else ip for ip in ips}
    names |= {h.lower() for h in extra}
    return sorted(names)


def _local_addresses() -> set[str]:
    """Every address of this machine's interfaces (the kernel's tables:
    IPv4 local routes, IPv6 interface addresses)."""
    out: set[str] = set()
    try:
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
        out |= {prev.split()[-1] for prev, line in zip(lines, lines[1:]) if "/32 host LOCAL" in line}
    except OSError:
        pass
    try:
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            out.add(str(ipaddress.IPv6Address(int(line.split()[0], 16))))
    except (OSError, ValueError, IndexError):
        pass
    return out


def build_app(out: str | Path, host: str = "127.0.0.1", extra_hosts: Sequence[str] = (),
              addresses: Sequence[str] | None = None, zip_limits: ZipLimits = ZipLimits()) -> Starlette:
    """The site over ``out``; ``addresses`` are those the server listens on
    (``kraftwerk serve`` passes the ones it checked and bound; by default
    ``host`` resolved as a listener resolves it). Every endpoint is a plain
    function: Starlette runs each in a worker thread."""
    site = Site(Path(out), zip_limits)
    if addresses is None:
        addresses = bind_addresses(host, 0)
    methods = ["GET", "HEAD"]
    routes = [
        Route("/", site.index, methods=methods),
        Route("/api/runs", site.index, methods=methods),
        Route("/r/", site.files, methods=methods),
        Route("/r/{path:path}", site.files, methods=methods),
        Route("/ls/", site.ls, methods=methods),
        Route("/ls/{path:path}", site.ls, methods=methods),
        Route("/zip/{path:path}", site.zip, methods=methods),
        Route("/heatmap/{path:path}", site.heatmap, methods=methods),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(TrustedHostMiddleware,
                                                          allowed_hosts=allowed_hosts(host, addresses, extra_hosts))])
    app.state.site = site
    return app


__all__ = ["build_app", "allowed_hosts"]
