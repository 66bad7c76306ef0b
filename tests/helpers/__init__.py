"""What the tests share besides fixtures: paths, predictions, evaluate.py runs, datasets, daemons, load, payloads."""
