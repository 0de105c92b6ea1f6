// The /docs API reference for people: Swagger UI served from the local swagger-ui-dist package
// (no CDN, works offline and in a locked-down container), pointed at /openapi.json.
import { createRequire } from 'node:module';
import sirv from 'sirv';

// Only the path helper: the package's index would load the whole Swagger UI bundle into the server.
const getAbsoluteFSPath = createRequire(import.meta.url)('swagger-ui-dist/absolute-path.js') as () => string;

/** Where the Swagger UI files are served from. */
export const DOCS_ASSETS = '/docs/assets';

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
</head>
<body>
<div id="swagger-ui"></div>
<script src="${DOCS_ASSETS}/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

/** Started by the page (a file, not inline, so the CSP needs no 'unsafe-inline' for scripts). */
export const DOCS_INIT = `window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true });\n`;

/** Static handler for the Swagger UI files (GET/HEAD only; anything else falls through to 404). */
export function createDocsAssets() {
  return sirv(getAbsoluteFSPath(), { etag: true, maxAge: 3600 });
}
