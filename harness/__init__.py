"""The harness: the rooms of docs/architecture.md ("The map").

Importing it first installs the accelerator (``reference_impl.accel``):
the compiled modules include some of the rooms below the harness (the
generator library, the history recorder), which must not be imported as
Python before the accelerator's finder is in place, or the whole compiled
set stays unused for the process.
"""

import reference_impl as _reference_impl  # noqa: F401  (installs the accelerator)
