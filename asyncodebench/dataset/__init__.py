"""The dataset: human-edited sources in data/ -> validated rows -> Parquet, card and notices; published rows read
back (`rows`). `sources` -> `validation` -> `build`/`export` (with `features`, `statement`, `problems`, `notices`,
`citation`); `publish` assembles and uploads the Hub folder; `hub_mirror` serves it locally for tests."""
