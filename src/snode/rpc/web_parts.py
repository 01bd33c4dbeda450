"""What the web view's pages share: the page shell, its style, its one script, cards, keys.

Every page is complete without JavaScript (it then reloads itself every NO_SCRIPT_REFRESH
seconds). With it, LIVE_SCRIPT listens to `/events` and, when the chain or this node changes,
fetches the same page again and swaps its <main> in place: no reload, no lost scroll position.
It also puts a copy button after every key. The page's Content-Security-Policy allows this one
script by its hash and connections to this origin only (api.server.page_headers).
"""

from __future__ import annotations

from html import escape
from typing import Final

from snode import __version__

NO_SCRIPT_REFRESH: Final = 10
LIVE_EVENTS: Final = ("block", "reorganization", "state", "reward", "proof_accepted", "proof_refused",
                      "sync_finished", "missed")
"""The events after which a page is fetched again."""

LIVE_SCRIPT: Final = """
(() => {
  const live = document.getElementById('live');
  const addCopyButtons = () => {
    for (const key of document.querySelectorAll('code.key')) {
      if (key.nextElementSibling && key.nextElementSibling.classList.contains('copy')) continue;
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'copy';
      button.textContent = 'copy';
      button.title = 'copy the whole key';
      button.addEventListener('click', () => navigator.clipboard.writeText(key.textContent)
        .then(() => { button.textContent = 'copied'; }, () => { button.textContent = 'select it'; }));
      key.after(button);
    }
  };
  let waiting = false;
  const refresh = () => {
    if (waiting) return;
    waiting = true;
    setTimeout(async () => {
      try {
        const answer = await fetch(location.href, {cache: 'no-store'});
        const page = new DOMParser().parseFromString(await answer.text(), 'text/html');
        const fresh = page.querySelector('main');
        if (answer.ok && fresh) {
          document.querySelector('main').replaceWith(fresh);
          document.title = page.title;
          addCopyButtons();
          document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
        }
      } catch (e) {
        live.textContent = 'update failed: ' + e;
      } finally {
        waiting = false;
      }
    }, 250);
  };
  const source = new EventSource('/events');
  for (const kind of KINDS) source.addEventListener(kind, refresh);
  source.onopen = () => { live.textContent = 'live: updates from /events'; document.body.dataset.live = 'yes'; };
  source.onerror = () => { live.textContent = 'not live: reconnecting to /events'; document.body.dataset.live = 'no'; };
  addCopyButtons();
})();
""".replace("KINDS", "[" + ", ".join(f"'{k}'" for k in LIVE_EVENTS) + "]")

STYLE: Final = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1f24;background:#fafbfc}
h1{font-size:1.3em;margin:0 0 .6em}h2{font-size:1.05em;margin:1.4em 0 .4em}
.cards{display:flex;gap:1em;flex-wrap:wrap}.card{background:#fff;border:1px solid #d0d7de;
border-radius:6px;padding:.7em 1em;min-width:16em}.card h2{margin-top:0}
.card dt{color:#57606a;float:left;width:10.5em}.card dd{margin:0 0 .2em 10.5em}
table{border-collapse:collapse;background:#fff;width:100%}
th,td{border-bottom:1px solid #d8dee4;padding:.3em .6em;text-align:left;white-space:nowrap}
th a{color:inherit}td.num,th.num{text-align:right}.Active{color:#1a7f37}.Decomm{color:#bf8700}
.Await{color:#57606a}.bad{color:#cf222e}nav a{margin-right:.8em}code{font-size:.95em}
code.key{user-select:all;font-size:.85em}button.copy{margin-left:.4em;font-size:.75em;padding:0 .4em}
.scroll{overflow-x:auto}
"""


def page(title: str, network: str, body: str) -> str:
    """A whole page: `body` becomes its <main>, swapped in place by the live updates."""
    return "".join([
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f'<noscript><meta http-equiv="refresh" content="{NO_SCRIPT_REFRESH}"></noscript>',
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
        f'<h1><a href="/">snoded v{escape(__version__)}</a> &middot; {escape(network)}</h1>',
        f"<main>{body}</main>",
        f'<p><small>Read-only. <span id="live">Without JavaScript this page reloads every '
        f"{NO_SCRIPT_REFRESH} s.</span></small></p>",
        f"<script>{LIVE_SCRIPT}</script></body></html>",
    ])


def key(hex_key: str) -> str:
    """A key shown whole; one click selects all of it, and the script adds a copy button."""
    return f'<code class="key">{escape(hex_key)}</code>'


def node_link(hex_key: str) -> str:
    """A service node's key, whole, and a link to its page."""
    return f'{key(hex_key)} <a class="sn-page" href="/sn/{escape(hex_key)}">page</a>'


def card(title: str, rows: list[tuple[str, str]], ident: str) -> str:
    """A box of `label: value` rows (values are HTML, escaped by the caller)."""
    items = "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in rows)
    return f'<section class="card" id="{ident}"><h2>{escape(title)}</h2><dl>{items}</dl></section>'


def table(ident: str, heads: list[tuple[str, str]], rows: list[str], empty: str) -> str:
    """A table of (label, css class) columns and ready <tr> rows."""
    head = "".join(f'<th class="{cls}">{label}</th>' for label, cls in heads)
    body = "".join(rows) or f'<tr><td colspan="{len(heads)}">{escape(empty)}</td></tr>'
    return (f'<div class="scroll"><table id="{ident}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")
