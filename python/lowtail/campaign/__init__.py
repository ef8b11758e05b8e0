"""Campaigns: every capture pair of a directory analysed in parallel on a Dask cluster.

`pairs` finds the pairs by name and gives each its identity; `work` is what a worker runs
(the native analyzer on paths it can read, the matched series written where it lies);
`runner` is the coordinating process: it submits the pairs, follows the cluster, and is
the only writer of the store."""
