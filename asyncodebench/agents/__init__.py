"""Run agents under the execution protocols and write predictions `evaluate.py` scores (scripts/run_agents.py)."""
