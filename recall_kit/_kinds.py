"""The small closed vocabularies every layer of the engine shares."""

from __future__ import annotations

from typing import Literal

Strategy = Literal["heuristic", "model", "none"]  # who chose the delivered docs; none: nothing chosen
Phase = Literal["fast", "refined"]  # the heuristic's answer, or the settled (model) answer
ConsumePoint = Literal["initial", "tool_result"]  # the agent's two safe points
Placement = Literal["prepend", "append"]  # lead the system reminders / after the tool responses
