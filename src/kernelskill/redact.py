"""Credentials inside URLs, redacted before they are stored or shown: the one helper every writer uses.

`--base-url https://user:pw@host/v1` and `...?api_key=...` are common ways to reach a hosted endpoint. The URL is
kept as the provider's SDK needs it only inside the client; everything else (the run store's config, summary.json,
results.json, the report, console lines, error messages) gets `redact_url` / `redact_text`, which keep scheme,
host, port and path, so a reader still sees which server was used.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
# query parameters that carry a credential (api_key, access_token, key, sig, X-Amz-Signature, password …)
_SECRET_PARAM = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|session", re.IGNORECASE)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")


def redact_url(url: str | None) -> str | None:
    """`url` without credentials: the user-info part (user:password@) and secret-looking query values masked."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL we can take apart: mask all of it rather than risk showing a secret
        return MASK
    netloc = parts.netloc
    if "@" in netloc:  # a username alone may be the token (https://TOKEN@host), so the whole user-info goes
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, MASK if _SECRET_PARAM.search(k) else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """`text` with every URL in it redacted (error messages quote the endpoint they failed to reach)."""
    return _URL.sub(lambda m: redact_url(m.group(0)) or "", text) if "://" in text else text
