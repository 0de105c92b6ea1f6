// Browser test of /docs: Debian's Chromium (driven by playwright-core, no browser download) opens
// the API reference offline, finds every resource kind, and saves a screenshot to test-output/.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { QUIET_GROUP } from '../../src/web/docs.js';
import { withBrowser } from '../support/browser.js';
import { ROOT, type Service, startService } from '../support/helpers.js';

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

test("HEAD and OPTIONS wait in one closed group at the end, out of each kind's list, and open on a click", async ({ service }) => {
  await withBrowser(async (browser) => {
    const page = await browser.newPage();
    const failures: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') failures.push(message.text());
    });
    await page.goto(`${service.url}/docs`);
    await page.waitForSelector('.opblock-tag', { timeout: 20_000 });
    const tags = (await page.locator('.opblock-tag').allTextContents()).map((t) => t.trim());
    assert.ok(tags.at(-1)?.startsWith(QUIET_GROUP), tags.join(' | '));
    // The kinds' groups are open and list GET, POST, ... but no HEAD or OPTIONS; the last group is closed.
    assert.ok((await page.locator('.opblock-get').count()) > 0);
    assert.is(await page.locator('.opblock-head, .opblock-options').count(), 0);
    await page.locator('.opblock-tag', { hasText: QUIET_GROUP }).click();
    await page.locator('.opblock-head').first().waitFor({ timeout: 10_000 });
    const documented = Object.values<Record<string, unknown>>((await service.request('GET', '/openapi.json')).body.paths).flatMap((item) =>
      Object.keys(item).filter((method) => method === 'head' || method === 'options'),
    );
    assert.is(await page.locator('.opblock-head, .opblock-options').count(), documented.length);
    assert.equal(failures, []);
  }, 1600);
});

test.run();
