"""Counted checks, shared by the end-to-end scripts here and in docker/tests: every check is
counted, a failed one is printed at once, and the run closes with one summary line and its
exit status."""

from __future__ import annotations


class Checks:
    def __init__(self, label: str) -> None:
        self.label = label
        self.passed = 0
        self.failed: list[str] = []

    def check(self, ok: bool, what: str) -> bool:
        if ok:
            self.passed += 1
        else:
            self.failed.append(what)
            print(f"FAILED [{self.label}]: {what}", flush=True)
        return ok

    def close(self, title: str | None = None) -> int:
        """Prints 'TITLE: N checks ok, N failed' (TITLE defaults to the label); the exit
        status, 1 when any check failed."""
        print(
            f"{title or self.label}: {self.passed} checks ok, {len(self.failed)} failed",
            flush=True,
        )
        return 1 if self.failed else 0
