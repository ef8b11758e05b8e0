"""What killed commands left on this host, said first by every command: host changes still in
force from a `host apply` or `tune` killed outright (host/pending.py), and testbeds whose owner
is gone (testbed/registry.py) — each in one line with how to undo or remove it. A user who runs
no `tune` or `run` again is still told at the next lowtail command of any kind."""

from __future__ import annotations

from collections.abc import Sequence

from lowtail.core.terminal import shown

# Commands that deal with the leftovers themselves, or print for a machine to read.
_QUIET = (("testbed",), ("host", "undo"), ("completion",))


def notices(words: Sequence[str]) -> list[str]:
    """The lines to say before the command `words` (its non-option words) runs."""
    if any(tuple(words[: len(q)]) == q for q in _QUIET):
        return []
    from lowtail.host.pending import pending
    from lowtail.testbed.registry import dead_owner_tags

    lines = [
        f"a {entry.command} that was killed (pid {entry.owner_pid}) left host settings changed, "
        f"recorded in {shown(entry.undo_file)}: {entry.how_to_undo()}"
        for entry in pending()
    ]
    tags = dead_owner_tags()
    if tags:
        lines.append(
            f"{len(tags)} killed run(s) left testbed(s) on this host ({', '.join(tags[:3])}{', …' if len(tags) > 3 else ''}: "
            "namespaces, tracing instances, processes): `lowtail testbed clean` removes them"
        )
    return lines
