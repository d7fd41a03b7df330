"""What a run costs and why: `advisor` (which layout fits), `memory` (device memory and out-of-memory messages),
`profiler` (traces and the compute / communication split of a step), `hlo` (collectives in a compiled program),
`summary` (`strategy.summary()`), `tables` (the plain-text tables they print).
"""
