"""Malformed events, one defect each, named by the reason code staging must quarantine them under.

The codes are the staging contract (vcmt_staging.contract).
Staging checks them in this order and reports the first that applies, so each
corruption below breaks exactly one rule and leaves the earlier ones intact.
"""

from __future__ import annotations

import copy
import random

from vcmt_lab.cdc.domain import Domain
from vcmt_lab.cdc.envelope import Envelope, line_of
from vcmt_staging import contract
from vcmt_staging.contract import SIMPLE_REASONS

# The reasons of the simple encoding (the example's SQL staging), and of the real encodings, which
# also tell a position beyond what the version can pack (docs/staging.md#versions).
REASONS = SIMPLE_REASONS
DEBEZIUM_REASONS = contract.REASONS


def reasons_of(domain: Domain) -> tuple[str, ...]:
    """The reason codes lines of this domain's encoding are quarantined under."""
    return REASONS if domain.flavour == "simple" else DEBEZIUM_REASONS


# Debezium also emits `t` (truncate); it has no key, so staging treats it as unknown too.
_UNKNOWN_OPS = ("x", "upsert", "", None)


def _image_field(envelope: Envelope) -> str:
    """The image staging reads key and columns from: `before` for deletes, else `after`."""
    return "before" if envelope["op"] == "d" else "after"


def malformed_line(reason: str, valid: Envelope, domain: Domain, rng: random.Random, schema_json: str | None) -> str:
    """A JSON line made from a valid envelope by breaking the rule `reason` names."""
    if reason == "bad_json":
        text = line_of(valid, schema_json)
        if rng.random() < 0.5:
            # A proper prefix of a JSON object never parses: its outer brace is the last character.
            return text[: rng.randint(1, len(text) - 1)]
        return repr({"op": valid["op"], "after": valid["after"]})  # Python repr: quotes and None
    broken = copy.deepcopy(valid)
    image = broken[_image_field(broken)]
    if reason == "unknown_op":
        broken["op"] = rng.choice(_UNKNOWN_OPS)
    elif reason == "null_key":
        if rng.random() < 0.25:
            broken[_image_field(broken)] = None
        else:
            image[rng.choice(domain.key)] = None
    elif reason == "null_version":
        # The version is made of `lsn` (PostgreSQL, simple) or the binlog `file` and `pos` (MySQL).
        field = "pos" if domain.flavour == "mysql" else "lsn"
        if rng.random() < 0.5:
            broken["source"][field] = None
        else:
            del broken["source"][field]
    elif reason == "version_out_of_range":
        if domain.flavour == "mysql":
            broken["source"]["row"] = 4096  # 12 bits of row index
        else:
            broken["source"]["lsn"] = 2**62 + rng.randint(0, 1000)
    elif reason == "wrong_type":
        if domain.flavour == "simple" and rng.random() < 0.2:
            broken["source"]["lsn"] = "0/16B3748"  # PostgreSQL's text form of an LSN
        else:
            column = rng.choice(sorted(domain.typed_fields))
            image[column] = rng.choice(domain.typed_fields[column])
    else:
        raise ValueError(f"unknown malformed reason {reason!r}; expected one of {reasons_of(domain)}")
    return line_of(broken, schema_json)
