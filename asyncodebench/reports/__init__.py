"""What a run tells people: `report` (report.json, Markdown, CSV) and `plots` (the dependency resolution figure)."""
