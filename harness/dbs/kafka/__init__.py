"""Real Apache Kafka as a db: getting its jars (``dist``) and writing each
node's configuration (``props``). The db itself is ``harness.dbs.kafka.db``."""
