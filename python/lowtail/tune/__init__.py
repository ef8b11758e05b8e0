"""`lowtail tune`: from a bad tail to a verified fix — apply the remedies that fit what
`explain` found, measure again, keep only what made a resolvable improvement
(proposals.py: what to try; loop.py: the loop and its safety)."""
