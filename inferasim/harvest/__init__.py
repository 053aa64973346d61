"""Harvest: measure the regime a scenario describes on real hardware (behaviour.md 2).

``plan`` writes the exact engine and client commands, ``run`` executes them on the GPU host
(server in its own process group, always stopped), ``parse`` turns what ran into anchors.
See docs/harvest.md.
"""
