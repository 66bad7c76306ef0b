"""AsynCodeBench release kit: build the dataset and evaluate predictions against it."""

__version__ = "0.4.2"
