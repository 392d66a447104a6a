"""Fault injection for the load lock: the child side (inject) and the harness (harness)."""
