"""A rule defined outside hsa, exposed as a list, as an entry point may do."""

from __future__ import annotations

import dataclasses

from hsa.augment import Rewrite, Rule


def _upper(harness, rng, params, context):
    tools = [dataclasses.replace(t, description=t.description.upper()) for t in harness.tools]
    return Rewrite(harness.replace(tools=tools))


RULES = [Rule("fake.upper", "1", _upper, doc="Upper-case tool descriptions.")]
