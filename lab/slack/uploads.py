"""File uploads in the three steps slack-sdk's ``WebClient.files_upload_v2`` takes.

1. ``files.getUploadURLExternal(filename, length)``: a file id and an upload URL (here,
   on the emulator);
2. a ``POST`` of the file's bytes to that URL, without the token (the URL is the
   credential);
3. ``files.completeUploadExternal(files=[{id, title}], channel_id, thread_ts,
   initial_comment)``: the files are shared, as one message carrying ``files``, in the
   channel or in the thread. Until then a file is private and shared nowhere, and a file
   is completed once.

``files.info`` describes a file; its ``url_private`` serves the bytes to the token's
bearer. What the workspace does with a completed upload (the channel, the thread, the
message) is in :mod:`lab.slack.workspace`; the files themselves are kept here.

Slack's docs name some errors (``missing_argument`` for a zero ``length``,
``alt_txt_too_large``, ``file_not_found``); where they do not (bytes that did not arrive,
or not as many as declared), the emulator answers ``file_size_mismatch``.
"""

from __future__ import annotations

import json
import mimetypes
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

#: Where upload URLs point; the rest of the path names the upload.
UPLOAD_PREFIX = "/upload/v1/"
#: Where a file's ``url_private`` points.
DOWNLOAD_PREFIX = "/files-pri/"
#: Slack's limit on an image's description.
_MAX_ALT_TXT = 1000

_TEXT = "text/plain; charset=utf-8"
#: An HTTP answer outside the Web API: status, body, content type.
Raw = tuple[int, bytes, str]


def _error(code: str) -> dict[str, Any]:
    return {"ok": False, "error": code}


@dataclass
class Upload:
    """One file: asked for, its bytes received (or not yet), shared (or not yet).

    Attributes:
        id: Slack's file id (``F...``).
        name: The file name given in step 1.
        length: The size in bytes declared in step 1.
        alt_txt: The image's description, if given.
        created: When step 1 was taken (epoch seconds).
        title: The title given at completion (the name until then).
        content: The bytes posted to the upload URL (None: none yet).
        shared: Completed: shared, or kept private for good.
        shares: Per channel id, where the file was shared: ``{"ts", "thread_ts"}``.
    """

    id: str
    name: str
    length: int
    alt_txt: str | None
    created: int
    title: str = ""
    content: bytes | None = None
    shared: bool = False
    shares: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    def view(self, root: str, shares: bool = True) -> dict[str, Any]:
        """The file in the shape the Web API returns it.

        Args:
            root: The emulator's URL (``url_private`` is on it).
            shares: With where it is shared (``files.info``); a message's copy has none.
        """
        mime = mimetypes.guess_type(self.name)[0] or "application/octet-stream"
        kind = self.name.rsplit(".", 1)[-1].lower() if "." in self.name else "binary"
        url = f"{root}{DOWNLOAD_PREFIX[1:]}{self.id}/{self.name}"
        view: dict[str, Any] = {
            "id": self.id,
            "created": self.created,
            "timestamp": self.created,
            "name": self.name,
            "title": self.title or self.name,
            "mimetype": mime,
            "filetype": kind,
            "pretty_type": kind.upper(),
            "size": len(self.content) if self.content is not None else self.length,
            "mode": "hosted",
            "is_external": False,
            "url_private": url,
            "url_private_download": f"{url}?download=1",
        }
        if shares:
            view["is_public"] = bool(self.shares)
            view["channels"] = sorted(self.shares)
            view["shares"] = {"public": {cid: list(s) for cid, s in self.shares.items()}}
        if self.alt_txt:
            view["alt_txt"] = self.alt_txt
        return view


class _Uploads:
    """The workspace's files and the upload URLs still open. Not thread-safe (see server)."""

    def __init__(self) -> None:
        self._files: dict[str, Upload] = {}
        #: Upload URL path -> file id, until the file is completed.
        self._slots: dict[str, str] = {}

    def open(self, params: dict[str, Any], root: str) -> dict[str, Any]:
        """``files.getUploadURLExternal``: a new file id and the URL to post its bytes to."""
        name = params.get("filename")
        if not isinstance(name, str) or not name.strip():
            return _error("invalid_arguments")
        try:
            length = int(str(params.get("length", "0")))
        except ValueError:
            return _error("invalid_arguments")
        if length <= 0:
            return _error("missing_argument")  # Slack's answer to a zero length
        alt_txt = params.get("alt_txt")
        if isinstance(alt_txt, str) and len(alt_txt) > _MAX_ALT_TXT:
            return _error("alt_txt_too_large")
        file_id = f"F{len(self._files) + 1:010d}"
        self._files[file_id] = Upload(
            file_id, name, length, alt_txt or None, int(time.time()), title=name
        )
        path = f"{UPLOAD_PREFIX}{file_id}-{secrets.token_hex(8)}"
        self._slots[path] = file_id
        return {"ok": True, "upload_url": f"{root}{path[1:]}", "file_id": file_id}

    def receive(self, method: str, path: str, body: bytes) -> Raw:
        """The ``POST`` of a file's bytes to its upload URL (a second one replaces the first)."""
        file_id = self._slots.get(path)
        if method != "POST" or file_id is None:
            return 404, b"invalid upload URL", _TEXT
        self._files[file_id].content = body
        return 200, f"OK - {len(body)}".encode(), _TEXT

    def claim(self, raw: Any) -> tuple[list[tuple[Upload, str | None]], str | None]:
        """The files ``files.completeUploadExternal`` names, checked; nothing is changed.

        Returns:
            Each file with the title asked for, and None; or no files and the error.
        """
        try:
            items = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            return [], "invalid_arguments"
        if not isinstance(items, list) or not items:
            return [], "invalid_arguments"
        out: list[tuple[Upload, str | None]] = []
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                return [], "invalid_arguments"
            found = self._files.get(item["id"])
            if found is None or found.shared:
                return [], "file_not_found"  # no such file, or completed already
            if found.content is None or len(found.content) != found.length:
                return [], "file_size_mismatch"
            title = item.get("title")
            out.append((found, title if isinstance(title, str) and title else None))
        return out, None

    def complete(self, claimed: list[tuple[Upload, str | None]]) -> None:
        """Mark claimed files completed, with their titles; their upload URLs close."""
        for upload, title in claimed:
            upload.shared = True
            upload.title = title or upload.title
        done = {u.id for u, _ in claimed}
        self._slots = {p: f for p, f in self._slots.items() if f not in done}

    def get(self, file_id: Any) -> Upload | None:
        """The file with this id, if any."""
        return self._files.get(file_id) if isinstance(file_id, str) else None

    def all(self) -> list[Upload]:
        """Every file, oldest first."""
        return list(self._files.values())

    def download(self, method: str, path: str, authorized: bool) -> Raw:
        """A ``GET`` of a file's ``url_private``: its bytes, to the token's bearer."""
        if method != "GET":
            return 405, b"invalid_method", _TEXT
        if not authorized:
            return 403, b"not_authed", _TEXT
        found = self.get(path.removeprefix(DOWNLOAD_PREFIX).split("/", 1)[0])
        if found is None or found.content is None or not found.shared:
            return 404, b"file_not_found", _TEXT
        mime = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
        return 200, found.content, mime
