"""The bundled reference implementation of Kafka's replication protocol.

Importing the package puts the mypyc-compiled copies of the core and the
simulator in front of the source when they were built from exactly these
sources (see :mod:`reference_impl.accel`).
"""

from . import accel as _accel

_accel.install()
