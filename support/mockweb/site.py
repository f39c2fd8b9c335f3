"""What the mock web answers: pages, robots.txt, sitemaps, traps, changing pages and per-host misbehaviour."""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime
from urllib.parse import unquote

from support.mockweb.web import (
    TINY_PNG,
    WebSpec,
    filler_text,
    host_ip,
    near_duplicate_words,
    page_path,
    parse_page_path,
    render_page,
)


@dataclass
class Reply:
    status: int
    content_type: str
    body: bytes
    headers: str = ""
    #: normal | drip (1 byte per 0.5 s, forever) | stream (endless 64 KiB chunks)
    #: | truncate (half the declared body, then close)
    mode: str = "normal"
    #: Seconds to wait before answering.
    delay: float = 0.0


SPECIAL_PATHS = (
    "/throttle-seconds", "/throttle-date", "/flaky", "/slow", "/huge.html", "/bomb", "/truncated",
    "/loop-a", "/chain-7", "/private-links", "/server-error", "/unavailable", "/big.html", "/large.html",
    "/found", "/see-other", "/temporary", "/permanent",
)

#: Redirects of each kind: path -> (status, where to).
REDIRECTS = {"/found": (302, "/p/2"), "/see-other": (303, "/p/3"), "/temporary": (307, "/p/4"),
             "/permanent": (308, "/p/5")}


class Scenario:
    """Per-host misbehaviour, from JSON::

        {"robots": {"<host>": {"status": 500, "fail_times": 1, "delay": 5,
                               "redirects": 3, "body": "...", "pad": 600000,
                               "after_pad": "Disallow: /"}},
         "specials": {"<host>": ["/throttle-seconds", ...]}}

    robots: ``status`` answered ``fail_times`` times (forever if absent), with
    ``retry_after`` (a ``Retry-After`` value) if given, then 404 or ``body``
    (200); ``delay`` before answering; ``redirects`` hops
    before the answer; ``pad`` bytes of comments then ``after_pad`` rules.
    specials: paths linked from the host's root page, with the behaviour
    ``respond_special`` gives them.

    changing: ``{"hosts": [...], "pages": 3, "period": 3600, "epoch": E,
    "scale": S}``: the root of each such host links to ``pages`` pages of
    each kind: ``/c/every/<i>`` (new content at every fetch),
    ``/c/poisson/<i>`` (changes at the times of a Poisson process with mean
    gap ``period`` seconds of simulated time, seeded by host and page) and
    ``/c/never/<i>``. Simulated time is ``epoch + (now - epoch) * scale``, as
    the crawler's ``RECRAWL_TIME_SCALE``/``RECRAWL_TIME_EPOCH`` make it.
    Each answer has an ``ETag`` and a ``Last-Modified`` (simulated time);
    ``If-None-Match`` / ``If-Modified-Since`` that match get a ``304``.

    js: ``{"hosts": [...], "evil": [...], "leak": "http://..."}``: the pages of
    these hosts are application shells (an empty ``<div id="root">``, a
    ``<noscript>``, ``/static/app.js``) whose script fetches
    ``/api/page?path=<path>`` (JSON: title, text, links of the page in the
    site graph) and builds the page's text and links. The script of an
    ``evil`` host also asks for ``/private/data`` (robots.txt should forbid
    it), for ``leak`` (another address) and for an image. ``hostile``:
    ``{"<host>": kind}``, a JavaScript host whose script, after building the
    page, misbehaves: ``never_settles`` (a request every 50 ms, forever),
    ``allocate`` (memory without end), ``busy`` (a loop that never returns),
    ``popup`` (opens a window), ``download`` (navigates to a binary file),
    ``scroll`` (an infinite scroll: more content whenever the page is scrolled,
    and it scrolls itself).
    """

    def __init__(self, path: str) -> None:
        data = json.loads(open(path).read()) if path else {}
        self.robots: dict[int, dict[str, object]] = {int(k): v for k, v in data.get("robots", {}).items()}
        self.specials: dict[int, list[str]] = {int(k): v for k, v in data.get("specials", {}).items()}
        #: host -> "calendar" | "session" | "repeat" | "sitemap"
        self.traps: dict[int, str] = {int(k): v for k, v in data.get("traps", {}).items()}
        farm = data.get("farm") or {}
        #: Hosts named h<i>.<domain> (a link farm under one registered domain).
        self.farm_hosts = range(int(farm.get("start", 0)), int(farm.get("start", 0)) + int(farm.get("count", 0)))
        self.farm_domain = str(farm.get("domain", "farm.test"))
        self.counts: dict[tuple[int, str], int] = {}
        changing = data.get("changing") or {}
        self.changing_hosts: set[int] = {int(h) for h in changing.get("hosts", [])}
        self.changing_pages = int(changing.get("pages", 3))
        self.change_period = float(changing.get("period", 3600.0))
        self.change_epoch = float(changing.get("epoch", 0.0))
        self.change_scale = float(changing.get("scale", 1.0))
        js = data.get("js") or {}
        self.js_hosts: set[int] = {int(h) for h in js.get("hosts", [])} | {int(h) for h in js.get("evil", [])}
        self.evil_hosts: set[int] = {int(h) for h in js.get("evil", [])}
        self.leak_url = str(js.get("leak", ""))
        self.hostile: dict[int, str] = {int(h): str(kind) for h, kind in js.get("hostile", {}).items()}
        self.js_hosts |= set(self.hostile)
        self._change_times: dict[tuple[int, int], list[float]] = {}
        self._change_rngs: dict[tuple[int, int], random.Random] = {}

    def simulated_now(self) -> float:
        return self.change_epoch + (time.time() - self.change_epoch) * self.change_scale

    def change_times(self, host: int, page: int, until: float) -> list[float]:
        """Change times of a Poisson page from the epoch up to at least ``until`` (simulated seconds)."""
        times = self._change_times.setdefault((host, page), [])
        if not times or times[-1] < until:
            # One generator per page: the change times are the same whoever asks, and when.
            rng = self._change_rngs.setdefault((host, page), random.Random(f"{host}-{page}"))
            t = times[-1] if times else self.change_epoch
            while t < until:
                t += rng.expovariate(1.0 / self.change_period)
                times.append(t)
        return times

    def seen(self, host: int, path: str) -> int:
        """How many times (host, path) was requested before this request."""
        count = self.counts.get((host, path), 0)
        self.counts[(host, path)] = count + 1
        return count


#: The page of a JavaScript host as the server sends it: no text, no links.
JS_SHELL = (b"<!DOCTYPE html><html><head><meta charset='utf-8'><title>App</title>"
            b"<script defer src='/static/app.js'></script></head><body><div id='root'></div>"
            b"<noscript>You need to enable JavaScript to run this app.</noscript></body></html>")


#: What a hostile host's script does once the page is built (see :class:`Scenario`).
HOSTILE_SCRIPTS = {
    "never_settles": "setInterval(() => fetch('/api/ping?' + Math.random()).catch(() => null), 50);",
    "allocate": "const hoard = []; setTimeout(() => { for (;;) { hoard.push(new Array(1e6).fill(hoard.length)); } }, 0);",
    "busy": "setTimeout(() => { for (;;) {} }, 0);",
    "popup": "window.open('/p/0', '_blank'); window.open('/api/ping?popup', 'other');",
    "download": "setTimeout(() => { location.href = '/file.bin'; }, 0);",
    "scroll": ("let n = 0; window.addEventListener('scroll', () => { const d = document.createElement('p');"
               " d.textContent = 'more ' + (n++); d.style.height = '2000px'; root.appendChild(d); });"
               " setInterval(() => window.scrollTo(0, document.body.scrollHeight), 10);"),
}


def js_app(evil: bool, leak: str, hostile: str = "") -> str:
    """The script of a JavaScript host: fetch the page's data, build its text and links."""
    extra = ""
    if evil:
        extra = (f"fetch('/private/data').catch(() => null); fetch({json.dumps(leak)}).catch(() => null);"
                 "new Image().src = '/static/logo.png';")
    return ("(async function () {" + extra +
            "const r = await fetch('/api/page?path=' + encodeURIComponent(location.pathname));"
            "const data = await r.json(); const root = document.getElementById('root');"
            "const h = document.createElement('h1'); h.textContent = data.title; root.appendChild(h);"
            "const p = document.createElement('p'); p.textContent = data.text; root.appendChild(p);"
            "const ul = document.createElement('ul');"
            "for (const href of data.links) { const li = document.createElement('li');"
            " const a = document.createElement('a'); a.href = href; a.textContent = 'link ' + href;"
            " li.appendChild(a); ul.appendChild(li); }"
            "root.appendChild(ul);" + HOSTILE_SCRIPTS.get(hostile, "") + "})();")


class MockWebServer:
    def __init__(self, spec: WebSpec, port: int, log_path: str | None, log_flush: float = 0.0) -> None:
        self.spec = spec
        self.port = port
        # Rendered pages, so the server spends its CPU on serving (bounded).
        self.cache: dict[tuple[int, int], bytes] = {}
        self.cache_size = 100_000
        # Line-buffered unless ``log_flush`` > 0: then lines are flushed at
        # most ``log_flush`` seconds after they are written (the benchmarks:
        # one write per batch, not per request).
        self.log_flush = log_flush
        self.log_file = open(log_path, "a", buffering=-1 if log_flush > 0 else 1) if log_path else None
        self.flush_pending = False
        self.host_names = [host_ip(host) for host in range(spec.hosts)]
        self.scenario = Scenario(spec.scenario)

    def log(self, host: int, method: str, path: str, start: float, end: float, status: int) -> None:
        if self.log_file is not None:
            name = self.host_names[host] if 0 <= host < len(self.host_names) else "?"
            self.log_file.write(f"{name}\t{method}\t{path}\t{start:.6f}\t{end:.6f}\t{status}\n")
            if self.log_flush > 0 and not self.flush_pending:
                self.flush_pending = True
                asyncio.get_running_loop().call_later(self.log_flush, self.flush_log)

    def flush_log(self) -> None:
        self.flush_pending = False
        if self.log_file is not None and not self.log_file.closed:
            self.log_file.flush()

    def respond(self, host: int, method: str, target: str, headers: dict[str, str] | None = None) -> Reply:
        path = target.split("#", 1)[0]
        if path.startswith("http://"):
            path = "/" + path.split("/", 3)[-1]
        if host < 0 or host >= self.spec.hosts:
            return Reply(404, "text/plain", b"no such host")
        if path == "/robots.txt" or path.startswith("/robots-hop-"):
            return self.respond_robots(host, path)
        if host in self.scenario.changing_hosts:
            reply = self.respond_changing(host, path, headers or {})
            if reply is not None:
                return reply
        trap = self.scenario.traps.get(host)
        if trap is not None or host in self.scenario.farm_hosts:
            reply = self.respond_trap(host, trap or "farm", path)
            if reply is not None:
                return reply
        if host in self.scenario.js_hosts:
            reply = self.respond_js(host, path)
            if reply is not None:
                return reply
        if path in self.scenario.specials.get(host, ()) or path.startswith(("/loop-", "/chain-")) or path in REDIRECTS:
            return self.respond_special(host, path)
        page = parse_page_path(path)
        if 0 <= page < self.spec.pages(host):
            return Reply(200, "text/html; charset=utf-8", self.page(host, page))
        if self.spec.extras and path == "/data.bin":
            return Reply(200, "application/octet-stream", bytes(range(256)) * 4)
        if self.spec.extras and path == "/moved":
            return Reply(301, "text/html", b"<html>moved</html>", f"Location: http://{host_ip(host)}:{self.port}/p/1\r\n")
        return Reply(404, "text/html", b"<html><body>not found</body></html>")

    def page(self, host: int, page: int) -> bytes:
        """The body of a page of the site graph, rendered once (the cache is bounded)."""
        body = self.cache.get((host, page))
        if body is None:
            body = render_page(self.spec, host, page, self.port)
            if page == 0 and host in self.scenario.specials:
                links = "".join(f'<a href="{p}">{p}</a>' for p in self.scenario.specials[host])
                body = body.replace(b"</ul>", links.encode() + b"</ul>")
            if len(self.cache) < self.cache_size:
                self.cache[(host, page)] = body
        return body

    def prerender(self) -> None:
        """Render every page of the site graph now, so that serving one costs no rendering."""
        self.cache_size = max(self.cache_size, self.spec.total_pages() + 16)
        for host in range(self.spec.hosts):
            for page in range(self.spec.pages(host)):
                self.page(host, page)

    def respond_js(self, host: int, path: str) -> Reply | None:
        """A host whose pages are built by JavaScript (see :class:`Scenario`)."""
        if path == "/static/app.js":
            leak = self.scenario.leak_url.replace("{port}", str(self.port))
            script = js_app(host in self.scenario.evil_hosts, leak, self.scenario.hostile.get(host, ""))
            return Reply(200, "application/javascript", script.encode())
        if path == "/file.bin":
            return Reply(200, "application/octet-stream", bytes(range(256)) * 64,
                         "Content-Disposition: attachment; filename=file.bin\r\n")
        if path.startswith("/api/ping"):
            return Reply(200, "application/json", b"{}")
        if path.startswith("/api/page?path="):
            page = parse_page_path(unquote(path.split("=", 1)[1]))
            if not 0 <= page < self.spec.pages(host):
                return Reply(404, "application/json", b"{}")
            links = []
            for other, target in self.spec.page_links(host, page):
                links.append(page_path(target) if other == host else f"http://{host_ip(other)}:{self.port}/")
            data = {"title": f"Host {host} page {page}", "links": links,
                    "text": filler_text(host, page, self.spec.seed, self.spec.filler_words)}
            return Reply(200, "application/json", json.dumps(data).encode())
        if path.startswith("/private/"):
            return Reply(200, "application/json", b'{"secret": true}')
        page = parse_page_path(path)
        if 0 <= page < self.spec.pages(host):
            return Reply(200, "text/html; charset=utf-8", JS_SHELL)
        return None

    def respond_changing(self, host: int, path: str, headers: dict[str, str]) -> Reply | None:
        """Pages that change at known rates, with validators (see :class:`Scenario`)."""
        scenario = self.scenario
        n = scenario.changing_pages
        if path == "/":
            links = "".join(
                f'<li><a href="/c/{kind}/{i}">{kind} {i}</a></li>' for kind in ("every", "poisson", "never")
                for i in range(n)
            )
            version, changed_at = 0, scenario.change_epoch
            body = f"<html><body><h1>changing host {host}</h1><ul>{links}</ul></body></html>"
        else:
            parts = path.strip("/").split("/")
            if len(parts) != 3 or parts[0] != "c" or not parts[2].isdigit() or int(parts[2]) >= n:
                return None
            kind, page = parts[1], int(parts[2])
            now = scenario.simulated_now()
            if kind == "every":
                version, changed_at = scenario.seen(host, path) + 1, now
            elif kind == "poisson":
                times = [t for t in scenario.change_times(host, page, now) if t <= now]
                version, changed_at = len(times), (times[-1] if times else scenario.change_epoch)
            elif kind == "never":
                version, changed_at = 0, scenario.change_epoch
            else:
                return None
            words = " ".join(near_duplicate_words(host * 100_003 + page * 1009 + version * 7 + len(kind)))
            body = f"<html><body><h1>{kind} {page} version {version}</h1><p>{words}</p></body></html>"
        etag = f'"{path.replace("/", "_")}-v{version}"'
        modified = int(changed_at)
        validators = f"ETag: {etag}\r\nLast-Modified: {formatdate(modified, usegmt=True)}\r\n"
        if_none_match = headers.get("if-none-match")
        if_modified_since = headers.get("if-modified-since")
        not_modified = False
        if if_none_match is not None:
            not_modified = etag in [tag.strip() for tag in if_none_match.split(",")]
        elif if_modified_since:
            try:
                not_modified = modified <= parsedate_to_datetime(if_modified_since).timestamp()
            except (TypeError, ValueError):
                not_modified = False
        if not_modified:
            return Reply(304, "text/html; charset=utf-8", b"", validators)
        return Reply(200, "text/html; charset=utf-8", body.encode(), validators)

    def farm_name(self, host: int) -> str:
        return f"h{host}.{self.scenario.farm_domain}"

    def respond_trap(self, host: int, trap: str, target: str) -> Reply | None:
        """Pages of trap hosts; None to fall back to the normal page graph."""
        path = target.split("?", 1)[0]
        html = "<html><body><p>trap {}</p>{}</body></html>"
        if trap == "calendar" and (path == "/" or path.startswith("/cal/")):
            year, month = 2026, 1
            if path.startswith("/cal/"):
                try:
                    year, month = (int(x) for x in path[5:].strip("/").split("/")[:2])
                except ValueError:
                    return Reply(404, "text/html", b"bad date")
            after = (year + month // 12, month % 12 + 1)
            before = (year - (month == 1), (month - 2) % 12 + 1)
            links = f'<a href="/cal/{after[0]}/{after[1]}">next</a><a href="/cal/{before[0]}/{before[1]}">prev</a>'
            return Reply(200, "text/html", html.format(path, links).encode())
        if trap == "session":
            page = parse_page_path(path.split(";", 1)[0])
            if not 0 <= page < self.spec.pages(host):
                return Reply(404, "text/html", b"not found")
            token = f"{time.time_ns():x}"
            links = "".join(
                f'<a href="{page_path(target_page)};jsessionid={token}">x</a><a href="{page_path(target_page)}?sid={token}">y</a>'
                for other, target_page in self.spec.page_links(host, page) if other == host
            )
            return Reply(200, "text/html", html.format(path, links).encode())
        if trap == "repeat" and (path == "/" or path.startswith("/r/")):
            # Every page links one level deeper, repeating the same pair: /r/a/b/a/b/...
            links = '<a href="/r/a/b/">start</a>' if path == "/" else '<a href="a/b/">deeper</a>'
            return Reply(200, "text/html", html.format(path, links).encode())
        if trap == "farm" and path != "/":
            return Reply(200, "text/html", html.format(path, "").encode())
        if trap == "farm":
            hosts = self.scenario.farm_hosts
            others = [hosts[(host - hosts.start + k * 37) % len(hosts)] for k in range(1, 21)]
            links = "".join(f'<a href="http://{self.farm_name(o)}:{self.port}/">f</a>' for o in others)
            links += '<a href="/p/1">p1</a>'
            return Reply(200, "text/html", html.format(path, links).encode())
        if trap == "sitemap":
            return self.respond_sitemap(host, path)
        if trap == "dups":
            return self.respond_dups(host, path)
        if trap == "images":
            return self.respond_images(host, path)
        return None

    def respond_dups(self, host: int, path: str) -> Reply | None:
        """Exact copies (/dup/<i>) and near copies (/near/<i>) of one article."""
        article = " ".join(near_duplicate_words(host))
        if path == "/":
            links = "".join(f'<a href="/dup/{i}">d</a><a href="/near/{i}">n</a>' for i in range(1, 5))
            return Reply(200, "text/html", f"<html><body><p>{article}</p>{links}</body></html>".encode())
        if path.startswith("/dup/"):
            return Reply(200, "text/html", f"<html><body><p>{article}</p></body></html>".encode())
        if path.startswith("/near/"):
            i = path.rsplit("/", 1)[1]
            # Small edits: a timestamp, a rotating banner, a session token.
            edits = f"<p>Updated 2026-11-{int(i) + 10} 10:0{i}</p><div>banner {i}</div><i>token{i}x</i>"
            return Reply(200, "text/html", f"<html><body>{edits}<p>{article}</p></body></html>".encode())
        return None

    def respond_images(self, host: int, path: str) -> Reply | None:
        if path == "/":
            body = ('<html><body><img src="/img/logo.png"><img src="/img/photo.jpg">'
                    '<a href="/p/1">p</a></body></html>')
            return Reply(200, "text/html", body.encode())
        if path == "/img/logo.png":
            return Reply(200, "image/png", TINY_PNG)
        if path == "/img/photo.jpg":
            return Reply(200, "image/jpeg", b"\xff\xd8\xff\xe0not really a jpeg")
        return None

    def respond_sitemap(self, host: int, path: str) -> Reply | None:
        import gzip

        base = f"http://{host_ip(host)}:{self.port}"
        urlset = "<?xml version='1.0'?><urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>{}</urlset>"
        if path == "/sitemap_index.xml":
            body = (
                "<?xml version='1.0'?><sitemapindex xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>"
                f"<sitemap><loc>{base}/sitemap1.xml.gz</loc></sitemap>"
                f"<sitemap><loc>{base}/sitemap2.xml</loc></sitemap></sitemapindex>"
            )
            return Reply(200, "application/xml", body.encode())
        if path == "/sitemap1.xml.gz":
            entries = "".join(f"<url><loc>{base}/s/{i}</loc><lastmod>2026-11-0{1 + i % 9}</lastmod></url>"
                              for i in range(1, 6))
            return Reply(200, "application/x-gzip", gzip.compress(urlset.format(entries).encode()))
        if path == "/sitemap2.xml":
            entries = "".join(f"<url><loc>{base}/s/{i}</loc></url>" for i in range(6, 9))
            entries += "<url><loc>http://elsewhere.test/s/99</loc></url>"
            return Reply(200, "text/xml", urlset.format(entries).encode())
        if path.startswith("/s/"):
            return Reply(200, "text/html", b"<html><body>only in the sitemap</body></html>")
        return None

    def respond_robots(self, host: int, path: str) -> Reply:
        rules = self.scenario.robots.get(host)
        if rules is None and self.scenario.traps.get(host) == "sitemap":
            index = f"User-agent: *\nSitemap: http://{host_ip(host)}:{self.port}/sitemap_index.xml\n"
            return Reply(200, "text/plain", index.encode())
        if rules is None:
            return Reply(404, "text/plain", b"no robots.txt here")
        redirects = int(rules.get("redirects", 0))  # type: ignore[call-overload]
        hop = int(path.rsplit("-", 1)[1].split(".")[0]) if path.startswith("/robots-hop-") else 0
        if hop < redirects:
            return Reply(301, "text/plain", b"", f"Location: /robots-hop-{hop + 1}.txt\r\n")
        count = self.scenario.seen(host, "/robots.txt")
        delay = float(rules.get("delay", 0))  # type: ignore[arg-type]
        status = int(rules.get("status", 200))  # type: ignore[call-overload]
        fail_times = rules.get("fail_times")
        if status != 200 and (fail_times is None or count < int(fail_times)):  # type: ignore[call-overload]
            retry_after = f"Retry-After: {rules['retry_after']}\r\n" if "retry_after" in rules else ""
            return Reply(status, "text/plain", b"robots.txt failure", retry_after, delay=delay)
        if "body" not in rules:
            return Reply(404, "text/plain", b"no robots.txt here", delay=delay)
        body = str(rules["body"]).replace("{port}", str(self.port)).encode()
        if "pad" in rules:
            line = b"# " + b"p" * 97 + b"\n"
            body += line * (int(rules["pad"]) // len(line) + 1)  # type: ignore[call-overload]
            body += str(rules.get("after_pad", "")).encode()
        return Reply(200, "text/plain", body, delay=delay)

    def respond_special(self, host: int, path: str) -> Reply:
        count = self.scenario.seen(host, path)
        html = b"<html><body><p>special page</p></body></html>"
        if path == "/throttle-seconds" and count == 0:
            return Reply(429, "text/html", b"slow down", "Retry-After: 2\r\n")
        if path == "/throttle-date" and count == 0:
            from email.utils import formatdate

            return Reply(429, "text/html", b"slow down", f"Retry-After: {formatdate(time.time() + 3, usegmt=True)}\r\n")
        if path == "/flaky" and count < 2:
            return Reply(503, "text/html", b"try later")
        if path == "/server-error":
            return Reply(500, "text/html", b"broken")
        if path == "/unavailable":
            return Reply(503, "text/html", b"<html><body>down for good</body></html>")
        if path == "/big.html":
            return Reply(200, "text/html", b"<html><body>" + b"x" * (2 * 1024 * 1024) + b"</body></html>")
        if path == "/large.html":
            return Reply(200, "text/html", b"<html><body>" + b"y" * (600 * 1024) + b"</body></html>")
        if path == "/slow":
            return Reply(200, "text/html", b"", mode="drip")
        if path == "/huge.html":
            return Reply(200, "application/octet-stream", b"", mode="stream")
        if path == "/bomb":
            import gzip

            bomb = self.cache.get((-1, -1))
            if bomb is None:
                bomb = gzip.compress(b"\0" * (20 * 1024 * 1024), compresslevel=9)
                self.cache[(-1, -1)] = bomb
            return Reply(200, "text/html", bomb, "Content-Encoding: gzip\r\n")
        if path == "/truncated":
            return Reply(200, "text/html", html * 40, mode="truncate")
        if path in REDIRECTS:
            status, target = REDIRECTS[path]
            return Reply(status, "text/html", b"<html><body>elsewhere</body></html>", f"Location: {target}\r\n")
        if path.startswith("/loop-"):
            other = "/loop-b" if path == "/loop-a" else "/loop-a"
            return Reply(301, "text/html", b"", f"Location: {other}\r\n")
        if path.startswith("/chain-"):
            left = int(path.rsplit("-", 1)[1])
            if left > 0:
                return Reply(301, "text/html", b"", f"Location: /chain-{left - 1}\r\n")
            return Reply(200, "text/html", html)
        if path == "/foreign":
            return Reply(200, "text/html", b'<html><body><a href="http://93.184.216.34/">public</a></body></html>')
        if path == "/private-links":
            links = (
                '<a href="http://169.254.169.254/latest/meta-data/">metadata</a>'
                '<a href="http://10.0.0.1/">intranet</a>'
                f'<a href="http://localhost:{self.port}/">localhost</a>'
            )
            return Reply(200, "text/html", f"<html><body>{links}</body></html>".encode())
        return Reply(200, "text/html", html)
