"""Hostile predictions for the demo task, by attack class: the main set, in-process tampering, skips, trees."""
