"""Loop guards of the field, re-implemented from their documented behaviour (``PEERS.md``).

One module per peer; each is registered under the entry-point group
``loopbench.detectors`` exactly as a third-party detector would be. The class
docstrings say how each peer's identity rule, window, thresholds and tiers were
mapped onto the detector protocol, and what our traces cannot carry.
"""
