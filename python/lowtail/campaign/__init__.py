"""Campaigns: every capture pair of a directory analysed in parallel on a Dask cluster.

`pairs` finds the pairs by name and gives each its identity; `work` is what a worker runs
(the native analyzer on paths it can read, the matched series written where it lies);
`runner` is the coordinating process: it submits the pairs, follows the cluster, and is
the only writer of the store."""

# NAME-pre.EXT with NAME-post.EXT; a --pattern is a regular expression with the same groups.
# Here rather than in `pairs` so that the command line's start-up need not import that.
DEFAULT_PATTERN = r"(?P<name>.+)-(?P<side>pre|post)\.(?P<ext>.+)"
