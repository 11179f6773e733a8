"""The HTML report of one run: verdict, configuration, anomalies with examples,
durability per acks mode, the nemesis timeline, latency and rate plots, links to
the history and node logs. Works on ``kraftwerk run`` and ``kraftwerk sim`` runs
alike (both write the same run directory)."""

from .render import render_report

__all__ = ["render_report"]
