"""Calibration: a step stage's cost constants from measured iterations
(:mod:`.fit`, ``serq fit``, on the solvers of :mod:`.linalg`) or from first
principles (:mod:`.roofline`, ``serq roofline``); docs/calibration.md."""
