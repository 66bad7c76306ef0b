"""Pure scoring of saved evidence, no containers: `grading` (evaluator reports, probe selectors), `checkpoints`
(the upstream checkpoint records), `metrics` (ADPR, DRS, DRE, CAIL, SAD proxy) -> `results` (one result record)."""
