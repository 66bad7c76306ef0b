"""Driving a run: `predictions` (reading the predictions file), `runner` (evaluate or rescore every prediction),
`runfolder` (locking and settings of a run folder) and `store` (the run folder's files, written atomically)."""
