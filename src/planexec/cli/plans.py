"""``planexec plans``: list, show and delete plan memory's templates (:mod:`planexec.memory`)."""

from __future__ import annotations

import asyncio
import json

from planexec.cli.guard import UserError
from planexec.cli.listing import Session
from planexec.memory import PlanMemory
from planexec.runs.db import aopen_store


async def plans(db: str, action: str, key: str | None, session: Session) -> int:
    """List the templates, or show or delete the one ``key`` names; return the exit code."""
    async with aopen_store(db) as store:
        memory = PlanMemory(store)
        if action == "list":
            rows = await asyncio.to_thread(memory.items)
            if session.as_json:
                listing = [{"key": k, **v} for k, v in rows]
                print(json.dumps(listing, ensure_ascii=False))  # noqa: T201 (the result)
                return 0
            if not rows:
                session.out.print("no plan templates yet: a run that succeeds leaves one")
            for k, template in rows:
                steps = len((template.get("plan") or {}).get("steps") or [])
                session.out.print(
                    f"{k}  {steps} steps  run {template.get('run')}  {template.get('task')}"
                )
            return 0
        if key is None:
            raise UserError(f"plans {action} needs the template's key (see: planexec plans)")
        if action == "show":
            found = await asyncio.to_thread(memory.get, key)
            if found is None:
                raise UserError(f"no plan template {key!r} (see: planexec plans)")
            print(json.dumps(found, ensure_ascii=False, indent=1))  # noqa: T201 (the result)
            return 0
        if action == "delete":
            if not await asyncio.to_thread(memory.delete, key):
                raise UserError(f"no plan template {key!r} (see: planexec plans)")
            session.out.print(f"deleted plan template {key}")
            return 0
        raise UserError(f"unknown plans action {action!r}: list, show or delete")
