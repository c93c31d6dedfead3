"""Which values are secrets, how they are scrubbed from data, text, model errors and stdout."""

from __future__ import annotations

import io
import re
import string
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatResult

from planexec.errors import ModelCallError
from planexec.llm import models
from planexec.llm.scrubbed import ScrubbedChatModel
from planexec.redaction.secrets import (
    QUERY_PASSWORD,
    REDACTED,
    mask_urls,
    redact,
    register_url_secrets,
    scrub_text,
    secret_values,
    url_passwords,
)
from planexec.redaction.stdio import ScrubbingStream
from tests.strategies import examples

KEY = "sk-unit-KEY-24680abcdef"


@pytest.fixture
def key_in_env(monkeypatch):
    monkeypatch.setenv("ACME_API_KEY", KEY)


PASSWORD_CHARS = string.ascii_letters + string.digits + "@:%!$&'()*+,;=-._~"


@settings(max_examples=examples(300), deadline=None)
@given(
    user=st.text(string.ascii_lowercase, min_size=1, max_size=8),
    password=st.text(PASSWORD_CHARS, min_size=1, max_size=24),
)
def test_a_url_password_is_masked_whatever_it_holds(user, password):
    url = f"postgresql://{user}:{password}@db.example:5432/runs"
    assert mask_urls(url) == f"postgresql://{user}:***@db.example:5432/runs"
    assert password in url_passwords(url) or password in mask_urls(url)
    assert mask_urls(f"error in {url}: refused") == f"error in {mask_urls(url)}: refused"


def test_query_passwords_are_masked_too():
    url = "postgresql://u@h/db?sslmode=require&password=hunter2hunter2&sslpassword=p4ss"
    assert mask_urls(url) == "postgresql://u@h/db?sslmode=require&password=***&sslpassword=***"


def test_which_env_values_are_secrets(monkeypatch):
    monkeypatch.setenv("SMTP_PASS", "smtp-password-1")
    monkeypatch.setenv("SENTRY_DSN", "https://abc123def456@o1.ingest.example/1")
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:db-password-7@db/app")
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to replace safely
    monkeypatch.setenv("PLAIN_SETTING", "not-a-secret-value")
    found = secret_values()
    assert {"smtp-password-1", "https://abc123def456@o1.ingest.example/1"} <= set(found)
    assert "db-password-7" in found
    assert "abc" not in found and "not-a-secret-value" not in found
    assert found == sorted(found, key=len, reverse=True)


def test_registered_database_passwords_are_secrets():
    register_url_secrets("postgresql://u:x@registered-pw-1@127.0.0.1:1/db")
    assert {"x@registered-pw-1", "registered-pw-1"} <= set(secret_values())
    assert "x" not in secret_values()  # too short: it would garble text
    register_url_secrets("postgresql://postgres:postgres@localhost/postgres")
    assert "postgres" not in secret_values()  # it is the user's name too: it hides nothing


def test_redact_keeps_the_shape_of_messages_and_data(key_in_env):
    message = AIMessage(
        content=f"key {KEY}",
        tool_calls=[{"name": "t", "args": {"k": KEY, KEY: [KEY]}, "id": "1"}],
        additional_kwargs={"raw": f"'{KEY}'"},
    )
    clean = redact(message)
    assert isinstance(clean, AIMessage) and clean.content == f"key {REDACTED}"
    assert clean.tool_calls[0]["args"] == {"k": REDACTED, REDACTED: [REDACTED]}
    assert KEY not in repr(clean)
    assert redact((KEY, 3, None)) == (REDACTED, 3, None)
    assert message.content == f"key {KEY}"  # the original is left alone


class Failing(BaseChatModel):
    """A provider model whose error quotes the key."""

    @property
    def _llm_type(self) -> str:
        return "failing"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        raise ConnectionError(f"refused for {KEY}")


def test_model_errors_keep_their_type_and_lose_the_key(key_in_env, monkeypatch):
    monkeypatch.setattr(models, "provider_model", lambda spec, *_: Failing())
    model = models.load_chat_model("any")
    assert isinstance(model, ScrubbedChatModel)
    with pytest.raises(ModelCallError) as caught:  # retried by the model layer, then given up
        model.invoke([HumanMessage("hi")])
    assert str(caught.value) == (
        f"the model failed (ConnectionError): refused for {REDACTED} (after 3 tries)"
    )
    assert KEY not in repr(model) and "Failing" in repr(model)


def test_stdout_is_scrubbed_line_by_line(key_in_env):
    target = io.StringIO()
    stream = ScrubbingStream(target)  # type: ignore[arg-type]
    for char in f"one {KEY} two\nhalf {KEY[:5]}":
        stream.write(char)
    assert target.getvalue() == f"one {REDACTED} two\n"
    stream.write(f"{KEY[5:]} end")
    stream.flush()
    assert target.getvalue() == f"one {REDACTED} two\nhalf {REDACTED} end"


def test_scrub_text_masks_urls_and_values(key_in_env):
    text = f"postgresql://u:pw@h/db failed; key {KEY}"
    assert scrub_text(text) == f"postgresql://u:***@h/db failed; key {REDACTED}"


# The URL pattern as it was (a regex): the oracle the linear scan must agree with.
OLD_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@]*):(?P<pw>\S*)@")
URLISH = st.text(alphabet="ab9+.-:/@?# \tpw=&'", max_size=60)


@settings(max_examples=examples(1500), deadline=None)
@given(URLISH, URLISH)
def test_url_masking_agrees_with_the_url_pattern(before, after):
    text = before + "postgresql://user:pw@host/db" + after
    for sample in (before, after, text, before + after):
        expected = OLD_URL_PASSWORD.sub(lambda m: f"{m.group('head')}:***@", sample)
        expected = QUERY_PASSWORD.sub(lambda m: f"{m.group('head')}***", expected)
        assert mask_urls(sample) == expected


HOSTILE_URL_TEXTS = {
    "scheme characters": "x" * 300_000,
    "scheme characters and digits": "x9" * 150_000,
    "one scheme, a long password without @": "a://u:" + "p" * 300_000,
    "a long scheme before one password": "x" * 300_000 + "://u:p",
    "many schemes without @": "a://b:" * 50_000,
    "many schemes after one match": "a://b:c@" + "d://e:" * 50_000,
    "many users": "a://" + "u" * 300_000,
    "a password= without its value": "password" + " " * 300_000,
    "an unclosed quoted password": "password='" + "a" * 300_000,
    "many empty passwords": "a://u:@" * 40_000,
}


@pytest.mark.parametrize("text", HOSTILE_URL_TEXTS.values(), ids=HOSTILE_URL_TEXTS.keys())
def test_masking_long_text_takes_linear_time(text):
    """Every line the CLI prints is masked (ScrubbingStream): a 300 KB value is no slower to
    print than to copy. The regex took 12 s on 100 KB of scheme characters (quadratic)."""
    target = io.StringIO()
    stream = ScrubbingStream(target)
    started = time.perf_counter()
    stream.write(text + "\n")
    stream.flush()
    url_passwords(text)
    assert time.perf_counter() - started < 3.0  # linear: milliseconds; quadratic: minutes
    assert target.getvalue().count("\n") == 1


def test_model_settings_named_or_shaped_as_credentials_are_never_shown():
    from planexec.llm.params import shown_params

    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"
    shown = shown_params(
        {
            "model": "m-1",
            "max_tokens": 64,
            "max_completion_tokens": 32,
            "sig": "s1",
            "signature": "s2",
            "jwt": "s3",
            "bearer": "s4",
            "sas": "s5",
            "client_cert": "s6",
            "private_key": "s7",
            "x_sig": "s8",
            "db_pwd": "s9",
            "session_id": "s10",
            "note": "Bearer abc.def",
            "basic": "basic dXNlcjpwdw==",
            "opaque": f"token is {jwt}",
            "design": "plain",
            "signal": "plain",
            "url": "https://u:pw@host.example/v1?sig=abc",
        }
    )
    assert (shown["model"], shown["max_tokens"], shown["max_completion_tokens"]) == ("m-1", 64, 32)
    for name in ("sig", "signature", "jwt", "bearer", "sas", "client_cert", "private_key",
                 "db_pwd", "session_id"):  # fmt: skip
        assert shown[name] == "[redacted]", name
    assert shown["x_sig"] == shown["note"] == shown["basic"] == shown["opaque"] == "[redacted]"
    assert shown["design"] == shown["signal"] == "plain"  # "sig" is a word, not a part of one
    assert shown["url"] == "https://host.example/v1"
