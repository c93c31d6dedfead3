"""Issue 35 through ``langgraph dev`` + langgraph_sdk: who approved, with the shipped auth recipe.

Two servers, one per module-scoped fixture (each start costs seconds):

- ``team``: ``"auth": {"path": "planexec.auth:auth"}`` with three users (``owner``, no
  permission; ``approver``, permission ``approve``; ``stranger``), maker-checker on
  (``PLANEXEC_SEPARATE_APPROVER=true``) and the approval hook pointing at a local receiver;
- ``plain``: ``langgraph dev`` without auth, approval requests that expire after a few
  seconds, the same hook: decisions there say the identity is unknown.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from tests.servers import langgraph_dev, scratch_config

pytestmark = pytest.mark.server

USERS = {
    "tok-owner-5f2a": {"identity": "owner"},
    "tok-approver-9c1e": {"identity": "approver", "permissions": ["approve"]},
    "tok-stranger-77d0": {"identity": "stranger"},
    "tok-admin-3b8d": {"identity": "admin", "permissions": ["admin"]},
}
TOKEN = {user["identity"]: token for token, user in USERS.items()}
EXPIRES_AFTER = 6  # seconds, on the plain server

LIST = {"goal": "list", "steps": [{"id": 1, "tool": "list_files", "description": "list"}]}
WRITE = {
    "goal": "write",
    "steps": [
        {
            "id": 1,
            "tool": "write_file",
            "args": {"path": "notes.md", "content": "written"},
            "description": "write notes",
        }
    ],
}


class HookReceiver:
    """A tiny HTTP receiver on 127.0.0.1 that keeps the JSON bodies POSTed to it."""

    def __init__(self) -> None:
        """Start listening on a free loopback port (in a daemon thread)."""
        self.events: list[dict[str, Any]] = []
        events = self.events

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    events.append(json.loads(self.rfile.read(length)))
                finally:
                    self.send_response(204)
                    self.end_headers()

            def log_message(self, *args: Any) -> None:
                """Stay quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def of(self, thread_id: str) -> list[dict[str, Any]]:
        """Return the events received for one thread, in order."""
        return [e for e in self.events if e.get("thread_id") == thread_id]

    def close(self) -> None:
        """Stop listening."""
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def hook() -> Iterator[HookReceiver]:
    receiver = HookReceiver()
    yield receiver
    receiver.close()


@pytest.fixture(scope="module")
def scripts(tmp_path_factory) -> Path:
    """The folder of recorded planner replies both servers may read (PLANEXEC_SCRIPTED_DIR)."""
    return tmp_path_factory.mktemp("team-scripts")


@pytest.fixture(scope="module")
def server_root(tmp_path_factory):
    """The operator's workspace root of both servers (PLANEXEC_WORKSPACE_ROOT)."""
    return tmp_path_factory.mktemp("team-root")


def _env(server_root: Path, scripts: Path, hook: HookReceiver, **more: str) -> dict[str, str]:
    return {
        "PLANEXEC_WORKSPACE_ROOT": str(server_root),
        "PLANEXEC_SCRIPTED_DIR": str(scripts),
        "PLANEXEC_PLAN_MEMORY": "off",
        "PLANEXEC_APPROVAL_HOOK": hook.url,
        **more,
    }


@pytest.fixture(scope="module")
def team_folder(tmp_path_factory) -> Path:
    """The scratch folder of the team server (its langgraph.json, log and .langgraph_api)."""
    return tmp_path_factory.mktemp("team-server")


@pytest.fixture(scope="module")
def team(team_folder, server_root, scripts, hook):
    """``langgraph dev`` with the shipped auth recipe, three users and maker-checker on."""
    folder = team_folder
    config = scratch_config(folder)
    data = json.loads(config.read_text())
    data["auth"] = {"path": "planexec.auth:auth", "disable_studio_auth": True}
    config.write_text(json.dumps(data))
    env = _env(
        server_root,
        scripts,
        hook,
        PLANEXEC_AUTH_USERS=json.dumps(USERS),
        PLANEXEC_SEPARATE_APPROVER="true",
    )
    with langgraph_dev(folder / "langgraph-dev.log", env, config=config) as url:
        yield url


@pytest.fixture(scope="module")
def plain(tmp_path_factory, server_root, scripts, hook):
    """Plain ``langgraph dev`` (no auth) whose approval requests expire quickly."""
    folder = tmp_path_factory.mktemp("plain-server")
    env = _env(server_root, scripts, hook, PLANEXEC_APPROVAL_EXPIRES_AFTER=str(EXPIRES_AFTER))
    with langgraph_dev(folder / "langgraph-dev.log", env) as url:
        yield url


def client_of(url: str, user: str | None) -> Any:
    """A langgraph_sdk client sending ``user``'s bearer token (none for None)."""
    headers = {"Authorization": f"Bearer {TOKEN[user]}"} if user else {}
    return get_client(url=url, headers=headers)


def planner(scripts: Path, plan: dict[str, Any]) -> str:
    """A scripted planner (a new file in ``scripts``) that answers every prompt with ``plan``."""
    path = scripts / f"planner-{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps([{"match": ".", "tool_calls": [{"name": "Plan", "args": plan}]}]))
    return f"scripted:{path}"


def shared_folder(server_root: Path) -> str:
    """A fresh folder under the workspace root's ``shared`` for one test's runs."""
    name = f"team-{uuid.uuid4().hex[:8]}"
    (server_root / "shared" / name).mkdir(parents=True)
    return name


async def asked(client: Any, tid: str) -> dict[str, Any] | None:
    """The approval request the thread waits on (None when it does not wait)."""
    state = await client.threads.get_state(tid)
    return state["interrupts"][0]["value"] if state["interrupts"] else None


async def decisions(client: Any, tid: str) -> list[dict[str, Any]]:
    """The thread's decision records."""
    return list((await client.threads.get_state(tid))["values"].get("decisions") or [])


async def refused_with(status: tuple[int, ...], call: Any) -> None:
    """Await ``call``; it must fail with one of the HTTP ``status`` codes."""
    with pytest.raises(httpx.HTTPStatusError) as caught:
        await call
    assert caught.value.response.status_code in status, caught.value.response.text


def test_the_recipe_refuses_unknown_tokens_and_studio_bypass(team):
    async def scenario():
        for headers in (
            {},
            {"Authorization": "Bearer not-a-token"},
            {"Authorization": f"Basic {TOKEN['owner']}"},
            {"x-auth-scheme": "langsmith"},  # langgraph dev's Studio bypass: disabled
        ):
            client = get_client(url=team, headers=headers)
            await refused_with((401,), client.threads.create())
        # any authenticated user reads the assistants (a run needs its assistant)
        [assistant] = await client_of(team, "stranger").assistants.search(graph_id="planexec")
        assert assistant["graph_id"] == "planexec"

    asyncio.run(scenario())


def test_the_team_flow_records_who_approved(team, team_folder, server_root, scripts, hook):
    name = shared_folder(server_root)
    ws = server_root / "shared" / name
    context = {"planner_model": planner(scripts, WRITE), "shared_folder": name}
    owner, approver = client_of(team, "owner"), client_of(team, "approver")
    stranger = client_of(team, "stranger")

    async def scenario():
        # the owner's thread is stamped with its owner, whatever metadata the client sent
        thread = await owner.threads.create(metadata={"owner": "approver"})
        tid = thread["thread_id"]
        assert thread["metadata"]["owner"] == "owner"
        await owner.runs.wait(tid, "planexec", input={"task": "write notes"}, context=context)
        first = await asked(owner, tid)
        assert first is not None and first["side_effect_tools"] == ["write_file"]
        state = await owner.threads.get_state(tid)
        assert state["values"]["started_by"] == {"id": "owner", "source": "server"}

        # a stranger can neither see the thread nor resume it
        await refused_with((403, 404), stranger.threads.get(tid))
        await refused_with((403, 404), stranger.threads.get_state(tid))
        await refused_with((403, 404), stranger.threads.get_history(tid))
        assert tid not in {t["thread_id"] for t in await stranger.threads.search(limit=100)}
        approve = {"action": "approve", "digest": first["digest"]}
        await refused_with(
            (403, 404),
            stranger.runs.wait(tid, "planexec", command={"resume": approve}, context=context),
        )
        await refused_with((403, 404), stranger.threads.update(tid, metadata={"owner": "stranger"}))
        await refused_with((403, 404), stranger.threads.update_state(tid, {"feedback": "x"}))
        await refused_with((403,), owner.threads.update(tid, metadata={"owner": "stranger"}))
        assert await asked(owner, tid) == first

        # maker-checker: the owner may not approve their own side-effecting plan, even when
        # the answer claims someone else ("by") or the context names a CLI caller
        await owner.runs.wait(
            tid,
            "planexec",
            command={"resume": {**approve, "by": "approver"}},
            context=context,
            raise_error=False,
        )
        forged_caller = {**context, "planexec_caller": {"id": "approver", "source": "cli"}}
        await owner.runs.wait(
            tid,
            "planexec",
            command={"resume": approve},
            context=forged_caller,
            raise_error=False,
        )
        await owner.runs.wait(  # configurable passes the server untouched: not believed either
            tid,
            "planexec",
            command={"resume": approve},
            config={"configurable": {"planexec_caller": {"id": "approver", "source": "cli"}}},
            raise_error=False,
        )
        still = await owner.threads.get_state(tid)
        assert still["next"] == ["approval"], still["next"]
        assert not (ws / "notes.md").exists()
        so_far = await decisions(owner, tid)
        assert so_far, "the refused self-approval must be recorded"
        assert so_far[0]["action"] == "refused"
        assert so_far[0]["by"] == {"id": "owner", "source": "server"}
        assert "owner" in so_far[0]["feedback"]
        assert all(d["by"]["source"] == "server" for d in so_far)
        assert all(d["by"]["id"] == "owner" for d in so_far)

        # the approver sees every thread and approves; a forged "by" is ignored
        assert tid in {t["thread_id"] for t in await approver.threads.search(limit=100)}
        now = await asked(approver, tid)
        assert now is not None
        assert now["history"] == so_far[-20:]
        done = await approver.runs.wait(
            tid,
            "planexec",
            command={"resume": {"action": "approve", "digest": now["digest"], "by": "admin"}},
            context=context,
        )
        assert done["final"]["status"] == "succeeded", done.get("final")
        records = await decisions(owner, tid)
        approved = records[-1]
        assert approved["action"] == "approve" and approved["kind"] == "plan"
        assert approved["by"] == {"id": "approver", "source": "server"}
        assert approved["digest"] == now["digest"] and approved["version"] == now["version"]
        assert approved["at"].endswith("+00:00")
        assert "admin" not in json.dumps(records)
        return tid, now

    tid, now = asyncio.run(scenario())
    assert (ws / "notes.md").read_text() == "written"

    # the hook heard the request wait and be answered, with no plan arguments in it
    events = hook.of(tid)
    assert [e["event"] for e in events][0] == "waiting", events
    answered = [e for e in events if e["event"] == "answered" and e.get("action") == "approve"]
    assert answered, events
    assert answered[-1]["digest"] == now["digest"]
    assert "approver" in json.dumps(answered[-1].get("by"))
    assert "written" not in json.dumps(events) and "notes.md" not in json.dumps(events)
    log = (team_folder / "langgraph-dev.log").read_text(errors="replace")
    assert not any(token in log for token in USERS), "a bearer token reached the server log"


def test_the_owner_approves_a_read_only_plan_under_maker_checker(team, server_root, scripts):
    """Maker-checker holds back side effects only: a plan without any runs on its starter's word."""
    name = shared_folder(server_root)
    context = {"planner_model": planner(scripts, LIST), "shared_folder": name}
    owner = client_of(team, "owner")

    async def scenario():
        tid = (await owner.threads.create())["thread_id"]
        await owner.runs.wait(tid, "planexec", input={"task": "list files"}, context=context)
        request = await asked(owner, tid)
        assert request is not None and request["side_effect_tools"] == []
        answer = {"action": "approve", "digest": request["digest"]}
        done = await owner.runs.wait(tid, "planexec", command={"resume": answer}, context=context)
        assert done["final"]["status"] == "succeeded"
        [approved] = await decisions(owner, tid)
        assert approved["by"] == {"id": "owner", "source": "server"}

    asyncio.run(scenario())


def test_without_auth_decisions_say_unknown_and_expired_requests_ask_again(
    plain, server_root, scripts, hook
):
    name = shared_folder(server_root)
    context = {"planner_model": planner(scripts, LIST), "shared_folder": name}
    client = client_of(plain, None)

    async def scenario():
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, "planexec", input={"task": "list files"}, context=context)
        first = await asked(client, tid)
        assert first is not None and first["expires_at"] > first["asked_at"]
        state = await client.threads.get_state(tid)
        assert state["values"]["started_by"] == {"id": None, "source": "unknown"}

        await asyncio.sleep(EXPIRES_AFTER + 0.5)  # the request expires; a late approval is refused
        late = {"action": "approve", "digest": first["digest"], "by": "somebody"}
        await client.runs.wait(tid, "planexec", command={"resume": late}, context=context)
        again = await asked(client, tid)
        assert again is not None, "an expired request must be asked again"
        assert again["digest"] == first["digest"]
        assert again["expires_at"] > first["expires_at"]
        [expired] = await decisions(client, tid)
        assert expired["action"] == "expired"
        assert expired["by"] == {"id": None, "source": "unknown"}  # no auth: "by" not believed
        assert not (await client.threads.get_state(tid))["values"].get("final")

        answer = {"action": "approve", "digest": again["digest"]}
        done = await client.runs.wait(tid, "planexec", command={"resume": answer}, context=context)
        assert done["final"]["status"] == "succeeded"
        records = await decisions(client, tid)
        assert [d["action"] for d in records] == ["expired", "approve"]
        assert records[-1]["by"] == {"id": None, "source": "unknown"}
        return tid

    tid = asyncio.run(scenario())
    kinds = [e["event"] for e in hook.of(tid)]
    assert kinds[:2] == ["waiting", "expired"], kinds
    assert kinds.count("waiting") >= 2 and "answered" in kinds, kinds


def test_the_trail_cannot_be_taken_erased_or_replayed(team, server_root, scripts):
    """Issue 35 review F2, F6, F7: ownership is fixed, runs stay, approved plans do not replay."""
    name = shared_folder(server_root)
    ws = server_root / "shared" / name
    context = {"planner_model": planner(scripts, WRITE), "shared_folder": name}
    owner, approver = client_of(team, "owner"), client_of(team, "approver")
    admin = client_of(team, "admin")

    async def scenario():
        tid = (await owner.threads.create())["thread_id"]
        await owner.runs.wait(tid, "planexec", input={"task": "write notes"}, context=context)
        request = await asked(owner, tid)
        assert request is not None
        answer = {"action": "approve", "digest": request["digest"]}
        done = await approver.runs.wait(
            tid, "planexec", command={"resume": answer}, context=context
        )
        assert done["final"]["status"] == "succeeded", done.get("final")
        (ws / "notes.md").unlink()
        trail = await decisions(owner, tid)

        # F2: nobody moves the owner key, not even an approver or an admin
        for who in (approver, admin, owner):
            for new_owner in ("approver", "admin", "owner"):
                await refused_with((403,), who.threads.update(tid, metadata={"owner": new_owner}))
        assert (await owner.threads.get(tid))["metadata"]["owner"] == "owner"

        # F6: deleting a run (or rolling one back) erases part of the trail: admin only
        runs = await owner.runs.list(tid)
        resume_run = runs[0]["run_id"]
        for who in (owner, approver):
            await refused_with((403,), who.runs.delete(tid, resume_run))
            await refused_with((403,), who.runs.cancel(tid, resume_run, action="rollback"))
            await refused_with(
                (403,),
                who.runs.create(
                    tid, "planexec", input=None, context=context, multitask_strategy="rollback"
                ),
            )
        assert await decisions(owner, tid) == trail

        # F7: the owner may not fork the thread at a checkpoint after the approval
        history = await owner.threads.get_history(tid, limit=50)
        approved = [
            h
            for h in history
            if h["values"].get("approved") and h["next"] not in ([], ["approval"])
        ]
        assert approved, [h["next"] for h in history]
        fork_at = approved[-1]["checkpoint"]["checkpoint_id"]
        with pytest.raises(httpx.HTTPStatusError) as caught:
            await owner.runs.wait(tid, "planexec", input=None, checkpoint_id=fork_at)
        assert caught.value.response.status_code == 403
        assert "approve" in caught.value.response.text
        await refused_with(
            (403,),
            owner.runs.wait(
                tid, "planexec", input=None, context={**context, "checkpoint_id": fork_at}
            ),
        )
        await refused_with((403,), owner.threads.copy(tid))
        assert not (ws / "notes.md").exists(), "the approved plan ran again"
        assert await decisions(owner, tid) == trail

        # approvers may copy (fork) a thread; the copy keeps its owner
        copied = await approver.threads.copy(tid)
        assert copied["metadata"]["owner"] == "owner"

        # the admin may delete a run; the owner (not an approver) deletes the whole thread
        await admin.runs.delete(tid, resume_run)
        await refused_with((403, 404), approver.threads.delete(tid))
        await owner.threads.delete(tid)
        await refused_with((404,), owner.threads.get(tid))

    asyncio.run(scenario())
