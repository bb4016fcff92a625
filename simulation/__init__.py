"""floodsim: agent-based flood adaptation on Mesa.

Households are Mesa agents that each own a :class:`~simulation.memory.CognitiveMemory`; one
model step is one simulated year. The subpackages follow the yearly cycle: ``hazard`` (events and
damage), ``agents`` (households and institutions), ``memory`` (what households remember),
``skills`` (what they may do), ``decisions`` (how they choose) and ``audit`` (what is recorded).
"""

from __future__ import annotations

__all__: list[str] = ["__version__"]

__version__ = "0.1.0"
