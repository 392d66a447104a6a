"""Randomized testing of vcmt_upsert against the Python oracle."""
