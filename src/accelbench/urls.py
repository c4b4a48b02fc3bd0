"""URLs as accelbench stores and shows them: credentials in a URL
(``http://user:key@host``) are sent as a Basic ``Authorization`` header and never
written or printed (:func:`redact_url`). Pure functions of the standard library, so every
layer may use them."""

from __future__ import annotations

import base64
import re
from urllib.parse import unquote, urlsplit, urlunsplit


def redact_url(url: str) -> str:
    """The URL as it may be stored or shown: credentials in it (``http://user:key@host``)
    become ``***``, like the API key. Anything else is returned unchanged; a URL too
    malformed to split loses everything between ``//`` and its last ``@`` all the same."""
    try:
        u = urlsplit(url)
    except ValueError:
        return re.sub(r"//[^/?#]*@", "//***@", url)
    if "@" not in u.netloc:
        return url
    return urlunsplit(u._replace(netloc="***@" + u.netloc.rpartition("@")[2]))


def split_credentials(url: str) -> tuple[str, str | None]:
    """The URL without its userinfo, and the ``Authorization: Basic`` value it carried
    (None without one). Requests send the credentials as that header, never in the URL."""
    u = urlsplit(url)
    if "@" not in u.netloc:
        return url, None
    user, password = unquote(u.username or ""), unquote(u.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return urlunsplit(u._replace(netloc=u.netloc.rpartition("@")[2])), f"Basic {token}"
