"""Errors name the thing: the endpoint a connection failed to, the folder a file was looked for
in, and an approval answer that is not one, explained in planexec's words (issue 33)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.errors import ConfigurationError, ProviderError
from planexec.tools import ToolRegistry, default_registry
from tests.helpers import echo, plan_of, plan_reply, scripted, step, thread
from tests.servers import free_port

# --- the endpoint a connection failed to ------------------------------------------------------


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_a_provider_nobody_answers_for_is_named_by_its_endpoint(monkeypatch, ctx, how):
    """A bad OPENAI_BASE_URL (a closed port) through the real client: the error names the URL
    the client tried, without the password or user of the URL."""
    port = free_port()
    monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://alice:hunter2-pass-word@127.0.0.1:{port}/v1")
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    run = ctx(planner_model="openai:planner", planner_timeouts={"total": 20.0})
    with pytest.raises(ProviderError) as raised:
        if how == "invoke":
            graph.invoke({"task": "t"}, thread(), context=run)
        else:
            asyncio.run(graph.ainvoke({"task": "t"}, thread(), context=run))
    said = str(raised.value)
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in said
    assert "hunter2" not in said and "alice" not in said
    assert "after 3 tries" in said


@pytest.mark.parametrize("url", ["localhost:8000/v1", "http://127.0.0.1:99999/v1"])
def test_a_base_url_no_client_can_call_is_refused_naming_the_setting(monkeypatch, ctx, url):
    """No scheme, or a port out of range: a one-line ConfigurationError naming the setting,
    not the client's "Connection error." three times (or a crash inside its connection code)."""
    monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    with pytest.raises(ConfigurationError, match=f"OPENAI_BASE_URL '{url}' is not a server's URL"):
        graph.invoke({"task": "t"}, thread(), context=ctx(planner_model="openai:planner"))


# A key rides in OPENAI_BASE_URL in many ways: as the user name, a password, the query, the
# fragment, ";params" or a path part. No message shows any of it, nor the run's state.
SECRET_IN_URL = [
    ("http://gwtokenABCDEF123456@127.0.0.1:{port}/v1", ["gwtokenABCDEF123456"]),
    ("http://127.0.0.1:{port}/v1#auth=FRAGSECRET1", ["FRAGSECRET1"]),
    ("http://127.0.0.1:{port}/v1;api_key=SEMISECRET1", ["SEMISECRET1"]),
    ("http://127.0.0.1:{port}/v1?api_key=QQQsecretQQQ", ["QQQsecretQQQ"]),
    ("http://127.0.0.1:{port}/sk-proj-abc_def_ghi_jkl/v1", ["abc_def_ghi_jkl"]),
    ("http://127.0.0.1:{port}/v1/key-Ab3dE-fG7hI-jK9lM", ["Ab3dE-fG7hI"]),
    ("http://127.0.0.1:{port}/gw/abcdefghijklmnopqrstuvwxyzabcdef/v1", ["abcdefghijklmnop"]),
    # a short value right after a part that names a secret, or a part that is no plain word
    ("http://127.0.0.1:{port}/v1/key/Xk29fj3LmQ", ["Xk29fj3LmQ"]),
    ("http://127.0.0.1:{port}/v1/pwd=hunter22", ["hunter22"]),
    ("http://127.0.0.1:{port}/api-key/s3cr3tval/v1", ["s3cr3tval"]),
    ("http://127.0.0.1:{port}/v1/token/abcdefghijklmnopqrstuvw", ["abcdefghijklmnopq"]),
    ("http://127.0.0.1:{port}/v1/sig=Zk81mMnq", ["Zk81mMnq"]),
    ("http://127.0.0.1:{port}/v1/Bearer%20Xk29fj3LmQ", ["Xk29fj3LmQ"]),
    ("http://127.0.0.1:{port}/v1/Zk81mMnq.Zk81mMnq.Zk81", ["Zk81mMnq"]),
    ("http://127.0.0.1:{port}/v1/ZK81MMNQ-ZK81MMNQ-ZK81", ["ZK81MMNQ"]),
    ("http://127.0.0.1:{port}/v1/token%253Dabcdefghij", ["abcdefghij"]),
    ("http://127.0.0.1:{port}/v1/\uff53\uff4b-proj-ABCDEFGH", ["ABCDEFGH", "\uff53\uff4b"]),
]
MALFORMED_SECRET_URL = [
    ("http://tokenABCDEF123456@host:99999/v1", ["tokenABCDEF123456"]),
    ("http://user:hunter2secret@host:99999/v1", ["hunter2secret", "user"]),
    ("localhost:8000/v1?api_key=QQQsecretQQQ", ["QQQsecretQQQ"]),
    ("ftp://u:pw-secret-77@h/v1", ["pw-secret-77"]),
    ("http://host:99999/v1#key=FRAGSECRET1", ["FRAGSECRET1"]),
    ("http://host:99999/v1/key-Ab3dE-fG7hI-jK9lM", ["Ab3dE-fG7hI"]),
    ("http://host:99999/v1;api_key=SEMISECRET1", ["SEMISECRET1"]),
    ("http://gwtokenABCDEF123456@127.0.0.1:99999/v1#auth=FRAGSECRET1", ["gwtoken", "FRAGSECRET"]),
    ("http://[::1/v1?key=IPV6SECRET", ["IPV6SECRET"]),
    ("sk-proj-ABCdef123456GHIjkl789", ["ABCdef123456GHIjkl789"]),
]


def _assert_hidden(secrets: list[str], *texts: str) -> None:
    for text in texts:
        for secret in secrets:
            assert secret.lower() not in text.lower(), (secret, text)


@pytest.mark.parametrize(("url", "secrets"), SECRET_IN_URL)
def test_a_provider_error_shows_no_key_of_the_base_url(monkeypatch, ctx, url, secrets):
    """Through the real client against a closed port: the endpoint it names is the URL's
    scheme, host, port and path, with key-like path parts masked."""
    port = free_port()
    monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", url.format(port=port))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    run, config = ctx(planner_model="openai:planner", planner_timeouts={"total": 20.0}), thread()
    with pytest.raises(ProviderError) as raised:
        graph.invoke({"task": "t"}, config, context=run)
    said = str(raised.value)
    assert f"at http://127.0.0.1:{port}/" in said
    _assert_hidden(secrets, said, str(graph.get_state(config).values))


@pytest.mark.parametrize(("url", "secrets"), MALFORMED_SECRET_URL)
def test_a_refused_base_url_shows_no_key_of_it(monkeypatch, ctx, url, secrets):
    """The refusal of a base URL no client can call names its scheme, host, port and path only."""
    monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    config = thread()
    refused = "^OPENAI_BASE_URL '.*' is not a server's URL"
    with pytest.raises(ConfigurationError, match=refused) as raised:
        graph.invoke({"task": "t"}, config, context=ctx(planner_model="openai:planner"))
    _assert_hidden(secrets, str(raised.value), str(graph.get_state(config).values))


def test_a_url_in_a_providers_words_shows_no_key(monkeypatch, ctx):
    """A gateway that quotes the URL it was called at: its words show that URL as every
    message does (scheme, host, port and path), not the key riding in it."""
    from tests.openai_server import Behaviour, serve

    quoted = "no route for http://gwtokenABCDEF123456@gw.example/v1;api_key=SEMISECRET1/chat?k=QQQ1"
    error = {"message": quoted, "type": "invalid_request_error", "code": "not_found"}
    with serve(lambda body: {}, behave=lambda body, n: Behaviour(status=404, error=error)) as (
        url,
        _,
    ):
        monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        graph, config = (
            build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo])),
            thread(),
        )
        with pytest.raises(ProviderError, match="no route for http://gw.example/v1/chat") as raised:
            graph.invoke({"task": "t"}, config, context=ctx(planner_model="openai:planner"))
    _assert_hidden(["gwtoken", "SEMISECRET1", "QQQ1"], str(raised.value))


# A provider's words may quote a URL whose user name and password hold a space (so the URL
# seems to end inside the password), or a key in its path: neither is shown.
QUOTED_URL = [
    ("failed for url 'http://alice:pa ss@127.0.0.1:1/v1'", ["alice", "ss@"], "http://***"),
    ("failed for http://alice pa ss@gw.example/v1 now", ["alice", "ss@"], "http://***"),
    ("failed for http://alice:pa/ss@gw.example/v1 now", ["alice", "ss@"], "http://***"),
    (
        "no route http://gw.example/v1/key/Xk29fj3LmQ/chat",
        ["Xk29fj3LmQ"],
        "http://gw.example/v1/key/***/chat",
    ),
    (
        "no route http://gw.example/v1/pwd=hunter22/chat",
        ["hunter22"],
        "http://gw.example/v1/***/chat",
    ),
]


@pytest.mark.parametrize(("quoted", "secrets", "shown"), QUOTED_URL)
def test_a_url_a_provider_quotes_shows_no_user_nor_key(monkeypatch, ctx, quoted, secrets, shown):
    """Through the real client and a gateway quoting the URL: what is unclear about a URL's
    user and host shows as its scheme only; a path shows its plain words only."""
    from tests.openai_server import Behaviour, serve

    error = {"message": quoted, "type": "invalid_request_error", "code": "not_found"}
    with serve(lambda body: {}, behave=lambda body, n: Behaviour(status=404, error=error)) as (
        url,
        _,
    ):
        monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        graph, config = (
            build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo])),
            thread(),
        )
        with pytest.raises(ProviderError) as raised:
            graph.invoke({"task": "t"}, config, context=ctx(planner_model="openai:planner"))
    said = str(raised.value)
    assert shown in said
    _assert_hidden(secrets, said, str(graph.get_state(config).values))


@pytest.mark.parametrize(
    "url",
    [
        "https://api.openai.com/v1/chat/completions",
        "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions",
        "http://localhost:1234/api/v1",
        "https://my-res.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18/chat",
        "https://my-res.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18/chat/completions",
        "http://[::1]:8080/v1",
        "https://api-inference.huggingface.co/v1/chat/completions",
        "localhost:8000/v1",
    ],
)
def test_a_url_without_a_key_is_shown_whole(url):
    """Masking keeps what tells a setting apart: the host, the port, a deployment's name."""
    from planexec.llm.endpoint import shown_url

    assert shown_url(url) == url


# --- the folder a file was looked for in ------------------------------------------------------


def test_a_missing_file_names_the_workspace_folder(use_models, ctx, workspace):
    plan = plan_of(step(1, "read_file", {"path": "nope.txt"}))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=default_registry())
    config, run = thread(), ctx(max_replans=0, step_max_attempts=1)
    graph.invoke({"task": "read nope.txt"}, config, context=run)
    out = graph.invoke(Command(resume="approve"), config, context=run)
    error = out["steps"]["1"]["error"]
    assert f"'nope.txt' does not exist in the workspace {workspace.resolve()}" in error


# --- approval answers in planexec's words -----------------------------------------------------

PLAN = plan_of(step(1, "echo", {"text": "one"}))
ACCEPTED = ('"approve"', '"edit"', '"plan"', '"reject"', '"feedback"', '"cancel"', '"reason"')
PYDANTIC = ("Input should be", "validation error for", "Field required", "discriminator",
            "Input tag", "Extra inputs", "String should")  # fmt: skip

MALFORMED: dict[str, tuple[Any, tuple[str, ...]]] = {
    "misspelt action": ({"action": "aprove"}, ("'aprove' is not an action", "'approve'")),
    "edit without a plan": ({"action": "edit"}, ('an edit needs "plan"',)),
    "no action, a number for digest": ({"digest": 5}, ('no "action"',)),
    "a digest that is a number": (
        {"action": "approve", "digest": 5},
        ('"digest" must be text', "not a number"),
    ),
    "a list": (["approve"], ("a list",)),
    "free text": ("yes please", ("'yes please' is not an action",)),
    "blank feedback": ({"action": "reject", "feedback": "  "}, ('"feedback" is blank',)),
    "an unknown field": ({"action": "cancel", "why": "x"}, ('a cancel has no "why"',)),
    "a plan that is text": ({"action": "edit", "plan": "x"}, ('"plan" must be an object',)),
}


@pytest.fixture
def graph():
    return build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))


@pytest.mark.parametrize(("answer", "names"), MALFORMED.values(), ids=list(MALFORMED))
def test_a_malformed_answer_is_explained_in_planexecs_words(graph, use_models, ctx, answer, names):
    use_models(planner=scripted(plan_reply(PLAN)))
    config = thread()
    graph.invoke({"task": "say one"}, config, context=ctx())
    out = graph.invoke(Command(resume=answer), config, context=ctx())
    asked = out["__interrupt__"][0].value
    error = asked["error"]
    assert error.startswith("answer not understood"), error
    for name in names:  # what was wrong
        assert name in error, (name, error)
    for shape in ACCEPTED:  # what is accepted, with the fields of each
        assert shape in error, (shape, error)
    assert not [word for word in PYDANTIC if word in error], error
    assert asked["version"] == 1  # still waiting, for the same plan
    assert graph.get_state(config).next == ("approval",)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded"
