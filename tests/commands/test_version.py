"""The commit `/version` names is read from the checkout the code runs from, also when
that checkout is a linked worktree (its HEAD is its own, its refs are the shared ones)."""

from __future__ import annotations

from pathlib import Path

from chainkeys.version import _head

A, B = "a" * 40, "b" * 40


def test_a_checkout_and_a_linked_worktree_name_their_own_commits(tmp_path: Path) -> None:
    shared = tmp_path / "repo" / ".git"
    (shared / "refs" / "heads").mkdir(parents=True)
    (shared / "HEAD").write_text("ref: refs/heads/main\n")
    (shared / "refs" / "heads" / "main").write_text(A + "\n")
    (shared / "packed-refs").write_text(f"# pack-refs with: peeled\n{B} refs/heads/topic\n")
    linked = shared / "worktrees" / "topic"
    linked.mkdir(parents=True)
    (linked / "HEAD").write_text("ref: refs/heads/topic\n")
    (linked / "commondir").write_text("../..\n")

    assert _head(shared) == A
    assert _head(linked) == B  # packed in the shared directory
    (shared / "refs" / "heads" / "topic").write_text(A + "\n")
    assert _head(linked) == A  # a loose ref wins over the packed one
    (linked / "HEAD").write_text(B + "\n")  # detached
    assert _head(linked) == B
