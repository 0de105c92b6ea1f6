// The live change feed page, /docs/changes: a small page beside the API reference that follows
// GET /_changes as Server-Sent Events. Served from this module (no CDN, nothing to copy into dist/)
// under a strict CSP: its one script is a file of this origin, its one style block is allowed by hash.
import { createHash } from 'node:crypto';
import type { Endpoint } from '../api/compile.js';
import { sendText } from '../http/messages.js';
import { READ_METHODS } from '../model/registry.js';
import { pageOrPointer } from './pointer.js';

/** Where the page and its script are served (both open without a token: OPEN_PATHS in src/model/registry.ts). */
export const CHANGES_PAGE = '/docs/changes';
const CHANGES_SCRIPT = '/docs/changes.js';

/** How many changes the page keeps on screen; older ones are dropped as new ones arrive. */
export const CHANGES_SHOWN = 200;

const CSS = `
:root { color-scheme: light dark; font-family: system-ui, sans-serif; }
body { margin: 0 auto; max-width: 60rem; padding: 1rem 1.5rem; }
h1 { font-size: 1.4rem; margin: 0 0 .25rem; }
[hidden] { display: none !important; }
#state { font-weight: 600; padding: .1rem .5rem; border-radius: .3rem; background: #8884; }
#state[data-state="live"] { background: #2a84; }
#state[data-state="reconnecting"], #state[data-state="connecting"] { background: #d904; }
#state[data-state="needs a token"], #state[data-state="token rejected"] { background: #d334; }
form { margin: .75rem 0; }
input { font: inherit; padding: .2rem .4rem; }
.hint { font-size: .85rem; opacity: .75; }
#changes { list-style: none; padding: 0; }
.change, .gap { border-top: 1px solid #8886; padding: .4rem 0; }
.head { display: flex; gap: .75rem; flex-wrap: wrap; align-items: baseline; font-family: ui-monospace, monospace; }
.op { font-weight: 700; }
.op-create { color: #2a8; }
.op-update { color: #c80; }
.op-delete { color: #d33; }
.at { opacity: .7; font-size: .85rem; }
.element { margin: .3rem 0 0; padding: .4rem .6rem; background: #8882; overflow-x: auto; font-size: .85rem; }
.gap { font-style: italic; }
`;

/**
 * The page's policy: nothing but this origin's script, the page's own style block (by its hash) and
 * requests to this origin (the ticket and the stream); no form may submit anywhere (the token field
 * is read by the script, never sent as a form).
 */
export const CHANGES_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  `style-src 'sha256-${createHash('sha256').update(CSS).digest('base64')}'`,
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>restable live change feed</title>
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
<style>${CSS}</style>
<script src="${CHANGES_SCRIPT}" defer></script>
</head>
<body>
<header>
<h1>Live change feed</h1>
<p>Every committed create, update and delete, newest on top (the last ${CHANGES_SHOWN}), as
<code>GET /_changes</code> streams them. <a href="/docs">API reference</a></p>
<p>Stream: <output id="state" data-state="connecting">connecting</output></p>
<form id="auth" hidden autocomplete="off">
<label for="token">This service needs a token to read its changes:</label>
<input id="token" name="token" type="password" autocomplete="off" required>
<button type="submit">Connect</button>
<p class="hint">The token stays in this page: it is sent once, in an Authorization header, for a
short-lived ticket that opens the stream (an EventSource cannot send headers).</p>
</form>
</header>
<main>
<ol id="changes" aria-live="polite"></ol>
</main>
</body>
</html>
`;

/** What /docs/changes tells a terminal. */
export const changesPointer = (origin: string): string => `restable live change feed

${origin}${CHANGES_PAGE} follows the change feed in a browser: open it in one.
From a terminal, follow it as Server-Sent Events:

  curl -N -H 'Accept: text/event-stream' ${origin}/_changes

or read it in JSON pages: curl ${origin}/_changes
(With authentication on, add -H 'Authorization: Bearer <token>'.) Its description: ${origin}/openapi.json
`;

/**
 * The page's script (plain ES2020, no template literals: it is itself one). Before each stream it
 * asks GET /_changes for one change as JSON, which tells whether a token is needed (401) and
 * whether the resume point is still kept (410); with a token it fetches a ticket, then opens an
 * EventSource after the last change shown (`since`: a new EventSource cannot send Last-Event-ID).
 * Any error closes the stream and opens a new one after a growing pause (1 s to 15 s), with a new
 * ticket: the browser's own retry would reuse a ticket that expires after a minute.
 */
const SCRIPT = `'use strict';
(function () {
  var SHOWN = ${CHANGES_SHOWN};
  var list = document.getElementById('changes');
  var state = document.getElementById('state');
  var form = document.getElementById('auth');
  var field = document.getElementById('token');
  var token = '';
  var last; // the seq of the newest change shown: the next stream starts after it
  var source;
  var timer;
  var pause = 1000;
  var attempt = 0; // each connection attempt's number: a superseded one stops at its next step

  function show(name) {
    state.dataset.state = name;
    state.textContent = name;
  }

  function element(tag, className, text) {
    var node = document.createElement(tag);
    node.className = className;
    node.textContent = text;
    return node;
  }

  function add(item) {
    list.prepend(item);
    while (list.childElementCount > SHOWN) list.lastElementChild.remove();
  }

  function render(change) {
    var id = typeof change.id === 'object' ? JSON.stringify(change.id) : String(change.id);
    var item = document.createElement('li');
    item.className = 'change';
    item.dataset.seq = String(change.seq);
    item.dataset.op = change.op;
    item.dataset.kind = change.kind;
    item.dataset.id = id;
    var head = document.createElement('div');
    head.className = 'head';
    var at = element('time', 'at', change.at);
    at.dateTime = change.at;
    head.append(element('span', 'seq', '#' + change.seq), element('span', 'op op-' + change.op, change.op),
      element('span', 'kind', change.kind), element('span', 'id', id), at);
    var body = 'element' in change ? JSON.stringify(change.element, null, 2) : '(no longer exists)';
    item.append(head, element('pre', 'element', body));
    add(item);
  }

  function receive(event) {
    var change = JSON.parse(event.data);
    if (last !== undefined && change.seq <= last) return;
    last = change.seq;
    render(change);
  }

  function feed(query) {
    if (last !== undefined) query.set('since', String(last));
    var text = query.toString();
    return '/_changes' + (text ? '?' + text : '');
  }

  function authorization() {
    return token ? { Authorization: 'Bearer ' + token } : {};
  }

  function stop() {
    clearTimeout(timer);
    timer = undefined;
    if (source) source.close();
    source = undefined;
  }

  function retry() {
    stop();
    show('reconnecting');
    timer = setTimeout(start, pause);
    pause = Math.min(pause * 2, 15000);
  }

  function askForToken(name) {
    stop();
    show(name);
    form.hidden = false;
    field.focus();
  }

  async function connect(mine) {
    var headers = Object.assign({ Accept: 'application/json' }, authorization());
    var probe = await fetch(feed(new URLSearchParams({ limit: '1' })), { headers: headers, cache: 'no-store' });
    if (mine !== attempt) return;
    if (probe.status === 401 || probe.status === 403) return askForToken(token ? 'token rejected' : 'needs a token');
    if (probe.status === 410) {
      add(element('li', 'gap', 'Changes after #' + last + ' are no longer kept: some were missed; following the feed from its end.'));
      last = undefined;
    } else if (!probe.ok) return retry();
    var query = new URLSearchParams();
    if (token) {
      var reply = await fetch('/_changes/ticket', { headers: authorization(), cache: 'no-store' });
      if (mine !== attempt) return;
      if (reply.status === 401 || reply.status === 403) return askForToken('token rejected');
      if (!reply.ok) return retry();
      var ticket = (await reply.json()).ticket;
      if (mine !== attempt) return;
      query.set('ticket', ticket);
    }
    source = new EventSource(feed(query));
    source.onopen = function () {
      pause = 1000;
      show('live');
    };
    source.onerror = retry;
    ['create', 'update', 'delete'].forEach(function (op) {
      source.addEventListener(op, receive);
    });
  }

  function start() {
    var mine = ++attempt;
    timer = undefined;
    connect(mine).catch(function () {
      if (mine === attempt) retry();
    });
  }

  form.addEventListener('submit', function (event) {
    event.preventDefault();
    token = field.value.trim();
    field.value = '';
    form.hidden = true;
    stop();
    show('connecting');
    start();
  });
  start();
})();
`;

/** The page and its script, read-only (GET and HEAD; OPTIONS lists them), routed like the other docs files. */
export function changesPageEndpoints(): Endpoint[] {
  const headers = { 'Content-Security-Policy': CHANGES_CSP };
  return [
    {
      path: CHANGES_PAGE,
      methods: READ_METHODS,
      produces: 'text/html',
      negotiates: false, // the page answers text/plain too (pageOrPointer)
      handlers: { GET: pageOrPointer(HTML, headers, changesPointer) },
    },
    {
      path: CHANGES_SCRIPT,
      methods: READ_METHODS,
      produces: 'text/javascript',
      handlers: { GET: (_req, res) => sendText(res, 'text/javascript', SCRIPT, headers) },
    },
  ];
}
