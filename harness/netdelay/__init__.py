"""The packet delayer that runs on a node's host (``python -m
harness.netdelay.delayer``): ``nfqueue`` speaks nfnetlink_queue from the
standard library, ``mark`` is the delay a packet's mark carries, ``delayer``
holds packets for it. A room of its own, importing only ``harness.rundir``'s
lease, because it runs where only the project's wheel and a node's
dependencies are installed (an ssh host): ``harness.runtimes`` would bring
the config, pydantic and the backends with it. The harness's side, the
rules and starting the delayers, is :mod:`harness.runtimes.net.latency`.
"""
