"""Suite-wide settings. Area fixtures live in tests/<area>/conftest.py."""

import os

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
