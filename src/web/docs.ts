// The /docs API reference for people: Swagger UI served from the local swagger-ui-dist package
// (no CDN, works offline and in a locked-down container), pointed at /openapi.json.
import { statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import sirv from 'sirv';
import type { Endpoint } from '../api/compile.js';
import { nothingServedAt } from '../errors.js';
import { sendEmpty, sendText } from '../http/messages.js';
import { READ_METHODS } from '../model/registry.js';
import { evaluatePreconditions } from '../request/conditions.js';
import { CHANGES_PAGE, changesPageEndpoints } from './changes-page.js';
import { pageOrPointer } from './pointer.js';

// Only the path helper: the package's index would load the whole Swagger UI bundle into the server.
const getAbsoluteFSPath = createRequire(import.meta.url)('swagger-ui-dist/absolute-path.js') as () => string;

/** Where the Swagger UI files are served from. */
const DOCS_ASSETS = '/docs/assets';

/** The page's policy: only this origin's scripts; Swagger UI sets inline styles and data: images. */
export const DOCS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'";

export const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>restable API reference</title>
<link rel="icon" type="image/png" href="${DOCS_ASSETS}/favicon-32x32.png">
<link rel="stylesheet" href="${DOCS_ASSETS}/swagger-ui.css">
<style>.restable-links { font-family: sans-serif; max-width: 1460px; margin: 0 auto; padding: 12px 20px 0; text-align: right; }</style>
</head>
<body>
<nav class="restable-links"><a href="${CHANGES_PAGE}">Live change feed</a></nav>
<div id="swagger-ui"></div>
<script src="${DOCS_ASSETS}/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

/** The Swagger UI group that gathers every path's HEAD and OPTIONS (they would double the page's length). */
export const QUIET_GROUP = 'HEAD and OPTIONS';

/**
 * Started by the page (a file, not inline, so the CSP needs no 'unsafe-inline' for scripts). Its plugin
 * moves HEAD and OPTIONS out of each kind's group into one group at the end, shown closed: the
 * document keeps them (every route is documented), the page shows each kind's own operations first.
 * It wraps Swagger UI's `taggedOperations` selector, the one its list of groups is drawn from.
 */
const DOCS_INIT = `'use strict';
(function () {
  var GROUP = ${JSON.stringify(QUIET_GROUP)};
  var QUIET = { head: true, options: true };
  function regroup(tags, Im) {
    var moved = [];
    var kept = tags
      .map(function (tag) {
        return tag.update('operations', function (operations) {
          return operations.filter(function (operation) {
            if (!QUIET[operation.get('method')]) return true;
            moved.push(operation);
            return false;
          });
        });
      })
      .filter(function (tag) { return tag.get('operations').size > 0; });
    if (moved.length === 0) return kept;
    var details = Im.Map({ name: GROUP, description: 'HEAD answers as GET does, without a body; OPTIONS answers 204 with Allow. Every path has them.' });
    return kept.set(GROUP, Im.Map({ tagDetails: details, operations: Im.List(moved) }));
  }
  function QuietMethods() {
    return {
      afterLoad: function (system) { system.layoutActions.show(['operations-tag', GROUP], false); },
      statePlugins: {
        spec: {
          wrapSelectors: {
            taggedOperations: function (original, system) {
              return function () { return regroup(original.apply(null, arguments), system.getSystem().Im); };
            },
          },
        },
      },
    };
  }
  window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true, plugins: [QuietMethods] });
})();
`;

/** How long (seconds) a browser may keep a documentation file before it asks again. */
const ASSET_MAX_AGE = 3600;
const ASSET_CACHE_CONTROL = `public,max-age=${ASSET_MAX_AGE}`;

/**
 * The Swagger UI files the page loads, and only those (the package also holds a stock demo page
 * pointed at someone else's API): `files` are their paths below `base`, each routed on its own,
 * with its entity tag (of its size and time: the package's files do not change while it runs);
 * `serve` answers GET/HEAD for one (sirv) given its path below `base`. The 304 is answered here,
 * with the ETag and Cache-Control a 200 carries (RFC 9110 §15.4.5), which sirv's own 304 drops.
 */
function createDocsAssets() {
  const root = getAbsoluteFSPath();
  const files = ['/swagger-ui.css', '/swagger-ui-bundle.js', '/favicon-16x16.png', '/favicon-32x32.png'];
  const tags = new Map(
    files.map((file) => {
      const { size, mtimeMs } = statSync(join(root, file));
      // Weak: a size and a time say the file is the same, not that its bytes are (RFC 9110 §8.8.1).
      return [file, `W/"${size}-${Math.trunc(mtimeMs)}"`];
    }),
  );
  return { base: DOCS_ASSETS, files, tags, serve: sirv(root, { etag: false, maxAge: ASSET_MAX_AGE }) };
}

/** Media types of the documentation's static files, by extension. */
const STATIC_TYPES: Record<string, string> = { css: 'text/css', js: 'text/javascript', png: 'image/png' };

/**
 * The documentation's static files: /docs/init.js, the Swagger UI files the page loads and the live
 * change feed page (src/web/changes-page.ts), read-only (GET and HEAD serve them, OPTIONS lists
 * that, the rest is a 405), routed like any endpoint.
 */
export function docsEndpoints(): Endpoint[] {
  const assets = createDocsAssets();
  const init: Endpoint = {
    path: '/docs/init.js',
    methods: READ_METHODS,
    produces: 'text/javascript',
    handlers: { GET: (_req, res) => sendText(res, 'text/javascript', DOCS_INIT, { 'Content-Security-Policy': DOCS_CSP }) },
  };
  return [
    init,
    ...changesPageEndpoints(),
    ...assets.files.map(
      (file): Endpoint => ({
        path: `${assets.base}${file}`,
        methods: READ_METHODS,
        produces: STATIC_TYPES[file.split('.').pop() ?? ''] ?? 'application/octet-stream',
        negotiates: false,
        handlers: {
          GET: (req, res) => {
            res.setHeader('Content-Security-Policy', DOCS_CSP);
            const tag = assets.tags.get(file) as string;
            res.setHeader('ETag', tag);
            res.setHeader('Cache-Control', ASSET_CACHE_CONTROL);
            if (evaluatePreconditions(req.method ?? 'GET', req.headers, tag) === 'notModified') return sendEmpty(res, 304);
            // sirv serves from the package folder: it reads the file's path below the prefix from req.url.
            req.url = file;
            // Whole files only (RFC 9110 §14.2 lets a server ignore Range): sirv's 416 would have no problem body.
            delete req.headers.range;
            assets.serve(req as never, res, () => {
              throw nothingServedAt(req.path);
            });
          },
        },
      }),
    ),
  ];
}

/** Where the HTTP API reference is kept, for people reading /docs from a terminal. */
export const REFERENCE_PAGE = 'docs/http-api.md';

/** What /docs tells a terminal. */
export const docsPointer = (origin: string): string => `restable API reference

${origin}/docs is the HTML reference for browsers (Swagger UI): open it in one.
From a terminal, read the OpenAPI 3.1 document it shows:

  curl ${origin}/openapi.json

The HTTP API reference (routes, representations, query language, errors) is ${REFERENCE_PAGE} in the repository.
`;

/** The /docs page: Swagger UI for a browser, a pointer to /openapi.json for a terminal. */
export const serveDocsPage = pageOrPointer(DOCS_HTML, { 'Content-Security-Policy': DOCS_CSP }, docsPointer);
