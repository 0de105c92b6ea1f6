// Browser test of /docs: Debian's Chromium (driven by playwright-core, no browser download) opens
// the API reference offline, finds every resource kind, and saves a screenshot to test-output/.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { withBrowser } from './browser.helpers.js';
import { ROOT, type Service, startService } from './helpers.js';

const test = suite<{ service: Service }>('/docs in a browser');

test.before(async (ctx) => {
  ctx.service = await startService({ env: { AUTH_TOKEN: 'docs-stay-open-0123456789' } });
});
test.after(async ({ service }) => service.close());

test('renders the reference from local files, listing every resource kind', async ({ service }) => {
  await withBrowser(async (browser) => {
    const page = await browser.newPage();
    const foreign: string[] = [];
    const failures: string[] = [];
    page.on('request', (request) => {
      if (!request.url().startsWith(service.url) && !request.url().startsWith('data:')) foreign.push(request.url());
    });
    page.on('requestfailed', (request) => failures.push(request.url()));
    page.on('console', (message) => {
      if (message.type() === 'error') failures.push(message.text());
    });
    const response = await page.goto(`${service.url}/docs`);
    assert.is(response?.status(), 200);
    await page.waitForSelector('.opblock-tag', { timeout: 20_000 });
    const tags = await page.locator('.opblock-tag').allTextContents();
    for (const kind of service.app.registry.resources.map((r) => r.name)) {
      assert.ok(
        tags.some((t) => t.trim().startsWith(kind)),
        `${kind} is not on the page: ${tags.join(' | ')}`,
      );
    }
    const dir = join(ROOT, 'test-output');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'docs.png');
    await page.screenshot({ path: file, fullPage: false });
    console.log(`\n  screenshot: ${file}`);
    for (const path of ['/users', '/users/{id}', '/users/{id}/pets']) {
      assert.ok(await page.locator(`[data-path="${path}"]`).first().isVisible(), `${path} is not on the page`);
    }
    assert.equal(foreign, [], 'the page loaded something from outside the service');
    assert.equal(failures, []);
  }, 1600);
});

test.run();
