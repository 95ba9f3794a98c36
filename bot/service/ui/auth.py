"""HTTP basic authentication for the page (`ui.password_file`): any user name, the password.

The password is compared in constant time (`hmac.compare_digest`, on SHA-256 digests so that
not even its length shows in the timing). A missing or wrong one is answered 401 with a
`WWW-Authenticate` challenge (RFC 7617), which makes a browser ask for it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

CHALLENGE = 'Basic realm="coding-agent-bot", charset="UTF-8"'


class BasicAuth:
    def __init__(self, password: str) -> None:
        self._digest = hashlib.sha256(password.encode()).digest()

    def allows(self, header: str | None) -> bool:
        """Whether an `Authorization` header carries the password."""
        given = _password(header)
        if given is None:
            return False
        return hmac.compare_digest(hashlib.sha256(given).digest(), self._digest)


def _password(header: str | None) -> bytes | None:
    scheme, _, token = (header or "").strip().partition(" ")
    if scheme.lower() != "basic" or not token:
        return None
    try:
        pair = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    _user, colon, password = pair.partition(b":")
    return password if colon else None
