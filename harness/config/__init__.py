"""The test's settings: one validated :class:`TestConfig` for both runtimes,
built from flags and/or a YAML file (:mod:`.testconfig`)."""

from harness.config.testconfig import TestConfig, build_config, load_yaml, parse_variants

__all__ = ["TestConfig", "build_config", "load_yaml", "parse_variants"]
