"""The columnar engine: canonical trajectories rendered under many variants, column by column.

``Engine(variants).render(table, out_traj, out_variant)`` returns the OpenAI ``messages`` column
for each (trajectory, variant) pair, equal to ``render(map_events(events, mapping), harness)``
row by row, without a Python loop over rows; ``core.py`` says how.
"""

from hsa.augment.engine.core import Engine, EngineStats, conversations_to_records
from hsa.harness.messages import MESSAGE, MESSAGES, TOOL_CALL

__all__ = ["MESSAGE", "MESSAGES", "TOOL_CALL", "Engine", "EngineStats", "conversations_to_records"]
