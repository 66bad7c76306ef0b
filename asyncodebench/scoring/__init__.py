"""Pure scoring of saved evidence, no containers: `grading` (evaluator reports, probe selectors), `checkpoints`
(the upstream checkpoint records), `dependency` (ADPR, DRS, DRE, CAIL and T of one run), `sad` (the SAD proxy) and
`bootstrap` (macro means over tasks with bootstrap intervals)."""
