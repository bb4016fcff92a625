"""Calibration: fit model parameters to behavioural targets (``floodsim calibrate``).

:mod:`.fit` holds the calibration file format, the method (simulated method of moments with a
bounded derivative-free optimiser from scipy) and the outputs; :mod:`.commands` the CLI
subcommand.

The package itself imports nothing heavy; import the submodule you need, e.g.
``from simulation.calibration.fit import calibrate``.
"""

from __future__ import annotations

__all__: list[str] = []
