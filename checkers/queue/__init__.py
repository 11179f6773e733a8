"""Jepsen's Kafka queue checks on send/poll histories."""
