"""Where node processes run and how faults reach them. ``local``: processes on
127.0.0.1 with a harness-owned TCP proxy on every directed link."""
