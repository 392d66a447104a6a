"""Seeded Debezium-style CDC events for the staging models, with the expected result (oracle).

from vcmt_lab.cdc import generate
manifest = generate(Path(".local/lake"), events=10_000, batches=5, seed=42)
"""

from vcmt_lab.cdc.generator import DEFAULT_TOPICS, generate
from vcmt_lab.cdc.malformed import REASONS
from vcmt_lab.cdc.manifest import Manifest, TopicManifest

__all__ = ["DEFAULT_TOPICS", "REASONS", "Manifest", "TopicManifest", "generate"]
