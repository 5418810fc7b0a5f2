"""The emulator's file uploads, driven by the real slack_sdk client as files_upload_v2 drives Slack."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from lab.slack import SlackEmulator

TOKEN = "xoxb-test-token"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    channels = ("#alerts", "ops")
    with SlackEmulator(
        token=TOKEN, channels=channels, archived=("#old",), without_bot=("#private",)
    ) as emu:
        yield emu


@pytest.fixture
def client(emulator: SlackEmulator) -> WebClient:
    return WebClient(token=TOKEN, base_url=emulator.base_url, retry_handlers=[])


def error_of(call: Any, **kw: Any) -> str:
    with pytest.raises(SlackApiError) as err:
        call(**kw)
    assert err.value.response.status_code == 200  # Slack answers API errors with HTTP 200
    return str(err.value.response["error"])


def post(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, headers=headers or {}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def get(url: str, token: str | None = TOKEN) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def uploaded(client: WebClient, body: bytes = PNG, length: int | None = None) -> str:
    """A file whose bytes arrived (steps 1 and 2); its id."""
    step1 = client.files_getUploadURLExternal(
        filename="chart.png", length=len(body) if length is None else length
    )
    assert post(step1["upload_url"], body)[0] == 200
    return str(step1["file_id"])


def test_files_upload_v2_shares_the_file_in_the_thread(
    client: WebClient, emulator: SlackEmulator
) -> None:
    parent = client.chat_postMessage(channel="#alerts", text="job-a: heap growing")
    done = client.files_upload_v2(
        channel=parent["channel"],
        thread_ts=parent["ts"],
        file=PNG,
        filename="chart.png",
        title="Evidence (fw-1)",
        alt_txt="heap floors",
        initial_comment="what decided it",
    )
    file_id = done["file"]["id"]
    assert done["file"]["title"] == "Evidence (fw-1)"

    thread = client.conversations_replies(channel=parent["channel"], ts=parent["ts"])
    shared = thread["messages"][1]
    assert shared["thread_ts"] == parent["ts"] and shared["text"] == "what decided it"
    [file] = shared["files"]
    assert (file["id"], file["name"], file["mimetype"]) == (file_id, "chart.png", "image/png")
    assert file["size"] == len(PNG) and file["alt_txt"] == "heap floors"
    [stored] = emulator.messages("#alerts")
    assert stored["replies"][0]["files"][0]["id"] == file_id

    info = client.files_info(file=file_id)["file"]
    [share] = info["shares"]["public"][parent["channel"]]
    assert (share["ts"], share["thread_ts"]) == (shared["ts"], parent["ts"])
    assert get(info["url_private"]) == (200, PNG)
    assert get(info["url_private"], token=None)[0] == 403
    [kept] = emulator.files()
    assert kept["content"] == PNG and kept["completed"]
    paths = [p for p, _ in emulator.requests]
    assert paths[1] == "/api/files.getUploadURLExternal"
    assert paths[2].startswith("/upload/v1/") and paths[3] == "/api/files.completeUploadExternal"


def test_a_file_completed_without_a_channel_stays_private(
    client: WebClient, emulator: SlackEmulator
) -> None:
    file_id = uploaded(client)
    client.files_completeUploadExternal(files=[{"id": file_id, "title": "t"}])
    assert emulator.messages() == []
    info = client.files_info(file=file_id)["file"]
    assert info["shares"] == {"public": {}} and info["title"] == "t"
    assert get(info["url_private"]) == (200, PNG)


def test_asking_for_an_upload_url_checks_the_arguments(client: WebClient) -> None:
    ask = client.files_getUploadURLExternal
    assert error_of(ask, filename="", length=10) == "invalid_arguments"
    assert error_of(ask, filename="x.png", length=0) == "missing_argument"
    assert error_of(ask, filename="x.png", length="ten") == "invalid_arguments"
    too_long = "x" * 1001
    assert error_of(ask, filename="x.png", length=10, alt_txt=too_long) == "alt_txt_too_large"


def test_bytes_posted_to_an_unknown_upload_url_are_refused(emulator: SlackEmulator) -> None:
    status, _ = post(emulator.base_url.replace("/api/", "/upload/v1/F000-nope"), PNG)
    assert status == 404


def test_completing_checks_the_files(client: WebClient, emulator: SlackEmulator) -> None:
    complete = client.files_completeUploadExternal
    assert error_of(complete, files=[{"id": "F404"}], channel_id="C0000001") == "file_not_found"
    assert error_of(complete, files=[], channel_id="C0000001") == "invalid_arguments"
    assert error_of(complete, files=[{"title": "no id"}]) == "invalid_arguments"
    not_json = {"files": "[{"}
    bad = error_of(lambda: client.api_call("files.completeUploadExternal", params=not_json))
    assert bad == "invalid_arguments"
    short = uploaded(client, PNG, length=len(PNG) + 1)
    assert error_of(complete, files=[{"id": short}]) == "file_size_mismatch"
    step1 = client.files_getUploadURLExternal(filename="never.png", length=10)
    assert error_of(complete, files=[{"id": step1["file_id"]}]) == "file_size_mismatch"
    once = uploaded(client)
    complete(files=[{"id": once}], channel_id="C0000001")
    assert error_of(complete, files=[{"id": once}], channel_id="C0000001") == "file_not_found"
    assert len(emulator.messages("#alerts")) == 1


def test_completing_checks_the_channel_and_thread_and_changes_nothing_on_error(
    client: WebClient, emulator: SlackEmulator
) -> None:
    parent = client.chat_postMessage(channel="#alerts", text="incident")
    reply = client.chat_postMessage(channel="#alerts", text="reply", thread_ts=parent["ts"])
    file_id = uploaded(client)
    files = [{"id": file_id, "title": "chart"}]
    complete = client.files_completeUploadExternal
    cases = {
        "channel_not_found": {"channel_id": "C9999999"},
        "not_in_channel": {"channel_id": "private"},
        "is_archived": {"channel_id": "#old"},
        "thread_not_found": {"channel_id": "C0000001", "thread_ts": "1.000001"},
        "invalid_thread_ts": {"channel_id": "C0000001", "thread_ts": reply["ts"]},
        "invalid_arguments": {"channels": ["C0000001", "C0000002"], "thread_ts": parent["ts"]},
    }
    for expected, where in cases.items():
        assert error_of(complete, files=files, **where) == expected, where
    assert emulator.files()[0]["completed"] is False
    complete(files=files, channel_id="C0000001", thread_ts=parent["ts"])  # still completable
    [stored] = emulator.messages("#alerts")
    assert [r.get("files", [{}])[0].get("id") for r in stored["replies"]] == [None, file_id]


def test_files_info_of_an_unknown_file(client: WebClient) -> None:
    assert error_of(client.files_info, file="F404") == "file_not_found"


def test_uploading_needs_files_write() -> None:
    with SlackEmulator(token=TOKEN, scopes=("chat:write",)) as emu:
        client = WebClient(token=TOKEN, base_url=emu.base_url, retry_handlers=[])
        with pytest.raises(SlackApiError) as err:
            client.files_upload_v2(channel="C0000001", file=PNG, filename="x.png")
        assert err.value.response["error"] == "missing_scope"
        assert err.value.response["needed"] == "files:write"


def test_faults_reach_the_upload_url(client: WebClient, emulator: SlackEmulator) -> None:
    emulator.fail_next(1, 503, path_prefix="/upload/")
    with pytest.raises(urllib.error.HTTPError):
        client.files_upload_v2(channel="C0000001", file=PNG, filename="x.png")
    assert emulator.messages("#alerts") == []
    assert emulator.files()[0]["content"] is None  # refused before it was stored
