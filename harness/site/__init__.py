"""``kraftwerk serve``: a read-only web site over a results directory.

An index of every run and campaign (from each run's ``summary.json``,
:mod:`harness.rundir.summary`), each run's report and files, a zip of a run
directory, campaign pages with their heatmap. Built on Starlette and served
by uvicorn; it answers GET and HEAD only and never serves a file whose real
path (symlinks followed) lies outside the results directory.
"""

from .app import build_app

__all__ = ["build_app"]
