"""URLs as accelbench sends, stores and shows them.

A server's URL is parsed once, where it enters (the command line, a config), into an
:class:`Endpoint`: the base URL without credentials, the ``Authorization`` header the
URL's ``user:key@`` part becomes, and the redacted form that may be written or printed.
Nothing else carries the credentials: an Endpoint formats (``str``, ``repr``, f-strings)
as its redacted form and is no JSON value, so a writer that stores an Endpoint stores
``display`` and the credentials cannot reach a file. Pure functions of the standard
library, so every layer may use them."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit


def redact_url(url: str | Endpoint) -> str:
    """The URL as it may be stored or shown: credentials in it (``http://user:key@host``)
    become ``***``, like the API key. Anything else is returned unchanged; a URL too
    malformed to split loses everything between ``//`` and its last ``@`` all the same.
    An Endpoint's is its ``display``."""
    if isinstance(url, Endpoint):
        return url.display
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
    return urlunsplit(u._replace(netloc=u.netloc.rpartition("@")[2])), _basic(u)


def _basic(u: SplitResult) -> str:
    """The ``Authorization: Basic`` value of a URL's ``user:password@`` part."""
    user, password = unquote(u.username or ""), unquote(u.password or "")
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class Endpoint:
    """A server's base URL, parsed once: ``url`` without credentials (what requests go
    to), ``auth`` the ``Authorization`` value of its ``user:key@`` part (None without
    one), ``display`` the form to store and print (``http://***@host:port`` where there
    were credentials). ``str()`` and ``repr()`` are ``display``. Deliberately no
    dataclass: orjson would serialize every field of one, ``auth`` included; an Endpoint
    given to a JSON writer is refused (TypeError), not written."""

    __slots__ = ("url", "display", "auth", "secrets")

    def __init__(
        self, url: str, display: str, auth: str | None = None, secrets: tuple[str, ...] = ()
    ) -> None:
        self.url = url
        self.display = display
        self.auth = auth
        # the password as written and percent-decoded, for scrubbing messages (Scrubber)
        self.secrets = secrets

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Endpoint):
            return NotImplemented
        return (self.url, self.auth) == (other.url, other.auth)

    def __hash__(self) -> int:
        return hash((self.url, self.auth))

    @classmethod
    def parse(cls, url: str | Endpoint) -> Endpoint:
        """``url`` as an Endpoint (an Endpoint is returned as it is). The URL is not
        checked here (``validate.check_url`` does, with the option's name); a trailing
        ``/`` is dropped."""
        if isinstance(url, Endpoint):
            return url
        url = url.rstrip("/")
        try:
            u = urlsplit(url)
        except ValueError:
            return cls(url=url, display=redact_url(url))
        if "@" not in u.netloc:
            return cls(url=url, display=url)
        bare, auth = split_credentials(url)
        secrets = (u.password, unquote(u.password)) if u.password else ()
        return cls(url=bare, display=redact_url(url), auth=auth, secrets=secrets)

    @classmethod
    def stored(cls, display: str) -> Endpoint:
        """The Endpoint of a URL as a file stores it (its ``display``, read back): the
        ``***@`` of credentials that were never written is dropped from ``url`` and no
        ``auth`` is made of it; ``needs_credentials`` says they must be given again."""
        display = display.rstrip("/")
        try:
            u = urlsplit(display)
        except ValueError:
            return cls(url=display, display=display)
        if "@" not in u.netloc:
            return cls(url=display, display=display)
        bare = urlunsplit(u._replace(netloc=u.netloc.rpartition("@")[2]))
        return cls(url=bare, display=display)

    @property
    def needs_credentials(self) -> bool:
        """The URL had credentials that this Endpoint does not hold (one read back from
        a file: ``stored``)."""
        return self.auth is None and self.display != self.url

    def __str__(self) -> str:
        return self.display

    def __repr__(self) -> str:
        return f"Endpoint({self.display!r})"

    @property
    def parts(self) -> SplitResult:
        return urlsplit(self.url)

    @property
    def scheme(self) -> str:
        return self.parts.scheme

    @property
    def host(self) -> str:
        return self.parts.hostname or ""

    @property
    def port(self) -> int:
        u = self.parts
        return u.port or (443 if u.scheme == "https" else 80)

    @property
    def root(self) -> str:
        """The server's root URL: ``url`` without a trailing ``/v1`` (paths such as
        ``/v1/models``, ``/metrics`` or ``/tokenize`` are joined to it)."""
        return self.url.removesuffix("/v1")

    def secret_parts(self) -> dict[str, object]:
        """Every field, credentials included, to hand the Endpoint to a child process of
        this one (never for a file); ``from_secret_parts`` rebuilds it."""
        return {"url": self.url, "display": self.display, "auth": self.auth,
                "secrets": list(self.secrets)}  # fmt: skip

    @classmethod
    def from_secret_parts(cls, d: Mapping[str, object]) -> Endpoint:
        auth, secrets = d.get("auth"), d.get("secrets")
        return cls(url=str(d["url"]), display=str(d["display"]),
                   auth=auth if isinstance(auth, str) else None,
                   secrets=tuple(str(x) for x in secrets) if isinstance(secrets, list) else ())  # fmt: skip

    def headers(self, api_key: str | None = None) -> dict[str, str]:
        """Authorization for a request: the API key (Bearer) if there is one, else the
        URL's credentials (Basic); the key wins, as a server takes one Authorization."""
        if api_key:
            return {"Authorization": f"Bearer {api_key}"}
        return {"Authorization": self.auth} if self.auth else {}
