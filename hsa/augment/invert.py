"""invert: an augmented dataset row back to the canonical events it was rendered from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hsa.augment.mapping import map_events
from hsa.augment.planner import Variant
from hsa.errors import ProtocolError
from hsa.harness.events import Event
from hsa.harness.parse import parse
from hsa.harness.render import Conversation


def invert(row: Mapping[str, Any] | Conversation, variant: Variant) -> list[Event]:
    """The canonical events of ``row`` (a dataset row, as a dict, or a ``Conversation``).

    The row's conversation is parsed under the variant's harness and its surface names are
    mapped back with the inverse of the variant's mapping. Call ids come back as written under
    ``api`` and as ``call_0``, ``call_1``, ... under text protocols, so trajectories with
    normal-form ids (``normalize_call_ids``) come back exactly. Argument values and their types
    come back exactly; a key the mapping moved comes back last in its object, since a move
    appends its value at the destination both ways. Events come back in the order the row
    shows them (``render.shown_order``: a hook's note fired among the results of one
    message's calls after the last of them).
    """
    if isinstance(row, Conversation):
        conversation = row
    else:
        found = row.get("variant_id")
        if found is not None and found != variant.variant_id:
            raise ProtocolError(
                f"row was rendered under variant {found!r}, not {variant.variant_id!r}",
                where=f"row {row.get('id')!r}",
            )
        conversation = Conversation([_message(m) for m in row["messages"]])
    surface = parse(conversation, variant.harness)
    return map_events(surface, variant.mapping.inverse(), variant.harness)


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A stored message (absent keys as nulls) as the chat message render wrote."""
    return {k: v for k, v in message.items() if v is not None or k in ("role", "content")}
