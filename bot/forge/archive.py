"""Archive downloads that follow the forge's redirect without carrying the API token along.

github.com answers the tarball endpoint with a 302 to codeload.github.com (GHES: `/_codeload/`
on its own host); the link carries a short-lived token of its own. PyGithub's `getFile` keeps
only the path of such a link and sends it to the API host with our token, which 404s, so the
two hops are made here: the API request with the token and no redirect following, then the
link with no credentials at all, streamed to disk, every connection closed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urljoin

import requests

from bot.forge.errors import ForgeError, NotFound

_REDIRECTS = (301, 302, 303, 307, 308)
CHUNK = 65536


class ArchiveHTTPError(ForgeError):
    """The API refused the archive request; headers and body kept for the adapter to classify."""

    def __init__(self, status: int, headers: Mapping[str, str], data: object) -> None:
        super().__init__(f"archive request failed ({status})", status)
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.data = data


def download_redirected(
    url: str, headers: Mapping[str, str], dest: Path, *, timeout: float
) -> None:
    """GET `url` with `headers`; follow its redirect with no credentials; write the body."""
    with (
        requests.Session() as session,
        session.get(
            url, headers=dict(headers), allow_redirects=False, stream=True, timeout=timeout
        ) as api,
    ):
        if api.status_code in _REDIRECTS and api.headers.get("Location"):
            link = urljoin(url, api.headers["Location"])
        elif api.status_code == 200:  # served directly (some proxies do): already ours
            _write(api, dest)
            return
        else:
            raise ArchiveHTTPError(api.status_code, api.headers, _json(api))
    # A fresh session: nothing of the API request (token, cookies) can follow the link.
    with requests.Session() as session:
        agent = {"User-Agent": headers.get("User-Agent", "coding-agent-bot")}
        with session.get(link, headers=agent, stream=True, timeout=timeout) as archive:
            if archive.status_code == 404:
                raise NotFound("archive link not found (expired or wrong host)", 404)
            archive.raise_for_status()
            _write(archive, dest)


def _write(response: requests.Response, dest: Path) -> None:
    with open(dest, "wb") as handle:
        for chunk in response.iter_content(CHUNK):
            handle.write(chunk)


def _json(response: requests.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return None
