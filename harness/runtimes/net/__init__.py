"""Kernel-level networks for the real-host backends.

``netns``: network namespaces on a bridge (the ``netns`` backend and the
throwaway sshd hosts of ``kraftwerk hosts up``); ``iptables``: partitions
and packet loss as firewall rules on each node's host, the same rules on
every backend that has a kernel (netns, docker, ssh).
"""
