"""Consumer groups: the classic group protocol's coordinator and committed
offsets on ``__consumer_offsets`` (see :mod:`.coordinator`)."""
