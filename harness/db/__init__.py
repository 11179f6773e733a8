"""Databases a test runs against: ``reference`` (the bundled broker, run by the
local backend) and ``external`` (a cluster someone else runs; bootstrap only)."""
