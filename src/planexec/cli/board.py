"""Every plan version that runs is shown, once, with what changed since the one shown before."""

from __future__ import annotations

from rich.console import Console

from planexec.cli.changes import plan_changes, same_plan
from planexec.cli.render import print_plan
from planexec.cli.ui import styled
from planexec.state import PlanDoc

MADE_BY = {
    "planner": "planned",
    "replanner": "revised after failures by the replanner",
    "approval": "your edit",
    "reviewer": "your edit",
}


class PlanBoard:
    """Remembers the plan last shown and the newest plan made; shows a plan when it changes."""

    def __init__(self, out: Console) -> None:
        """Print on ``out``."""
        self.out = out
        self.shown: PlanDoc | None = None
        self.latest: PlanDoc | None = None
        self.by = ""

    def made(self, plan: PlanDoc, by: str) -> None:
        """Note a plan a node made (the planner, the replanner, an accepted edit)."""
        self.latest, self.by = plan, by

    def show(self, plan: PlanDoc, heading: str) -> bool:
        """Print ``plan`` under ``heading`` unless it is the plan shown last; say if printed.

        A new version with the same steps (a revision that changed nothing) is named, not
        printed again: ``Plan v2 is unchanged from v1``.
        """
        if self.shown is not None and same_plan(plan, self.shown):
            before, now = self.shown.get("version"), plan.get("version")
            if now is not None and before != now:
                self.out.print(styled(("\n" + heading, "bold")))
                self.out.print(styled((f"Plan v{now} is unchanged from v{before}", "yellow")))
                self.shown = plan
                return True
            return False
        self.out.print(styled(("\n" + heading, "bold")))
        print_plan(self.out, plan)
        if self.shown is not None:
            changes = plan_changes(self.shown, plan)
            self.out.print(f"changes from v{self.shown.get('version', '?')}:")
            for line in changes or [styled("  (none in the steps)")]:
                self.out.print(styled("  ", line))
        self.shown = plan
        return True

    def before_run(self) -> None:
        """Show the plan about to run if it is not the one shown last (it needed no approval)."""
        if self.latest is None:
            return
        made = MADE_BY.get(self.by, f"made by {self.by}")
        heading = f"plan v{self.latest.get('version', '?')} runs ({made}"
        heading += "):" if self.by in {"approval", "reviewer"} else "; no approval needed):"
        self.show(self.latest, heading)
