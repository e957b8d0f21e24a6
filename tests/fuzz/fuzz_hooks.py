"""schemathesis' hooks for a run against chainkeys: the formats (tests/fuzz/fuzz_formats.py)
and a check that a schema-valid request refused with 400 names a rule beyond the schema
(tests/fuzz/fuzz_rules.py) by its code.

`st run` imports this module (SCHEMATHESIS_HOOKS=tests.fuzz.fuzz_hooks, PYTHONPATH at the
repository; README "Fuzz it yourself"); `beyond_schema_codes` is enabled in the run's
configuration (tests/fuzz/fuzz_run.py). A refusal with any other code, say a field's
pattern the document forgot, fails the run.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis
import tests.fuzz.fuzz_formats  # noqa: F401  (registers the formats)
from tests.fuzz.fuzz_rules import EVERYWHERE, rule_for


@schemathesis.check
def beyond_schema_codes(ctx: Any, response: Any, case: Any) -> bool | None:
    """A schema-valid request refused with 400 names a rule beyond the schema."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 400:
        return None
    rule = rule_for(case.operation.label)
    try:
        code = json.loads(response.content).get("code")
    except (ValueError, AttributeError):
        code = None
    if code not in EVERYWHERE and (rule is None or code not in rule.codes):
        raise AssertionError(
            f"schema-valid request refused with {code!r}, which no rule beyond "
            f"the schema of {case.operation.label} allows"
        )
    return None
