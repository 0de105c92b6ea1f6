// Browser test of the live change feed page, /docs/changes: Debian's Chromium (playwright-core, no
// browser download) opens it, the test writes through the API, and the page shows each change as
// its stream delivers it, newest on top, and catches up after its connection drops; with AUTH_TOKEN
// set it asks for the token and opens the stream with a ticket. Every wait is a locator's, never a sleep.
import { mkdirSync } from 'node:fs';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { CHANGES_SHOWN } from '../../src/web/changes-page.js';
import { withBrowser } from '../support/browser.js';
import { ROOT, type Service, startService } from '../support/helpers.js';

const TOKEN = 'changes-page-token-0123456789';
/** How long a locator waits for the page (a change reaches it within a second; Chromium may start slowly). */
const WAIT = { timeout: 15_000 };

interface Opened {
  page: Page;
  /** URLs the page requested outside the service, failed requests and console errors (CSP violations included). */
  foreign: string[];
  failures: string[];
  /** Every request the page made to the service: method, path with query, and its Authorization header. */
  requests: { method: string; url: string; authorization?: string }[];
}

/**
 * A TCP proxy to `target` on a port of its own: `down()` cuts every connection through it and refuses
 * new ones until `up()`, as a network that drops would.
 */
async function createProxy(target: string): Promise<{ url: string; down: () => void; up: () => void; close: () => Promise<void> }> {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  let refusing = false;
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const server = createServer((client) => {
    track(client);
    if (refusing) return client.destroy();
    const upstream = connect(Number(port), hostname);
    track(upstream);
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const cut = () => {
    for (const socket of sockets) socket.destroy();
  };
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    down: () => {
      refusing = true;
      cut();
    },
    up: () => {
      refusing = false;
    },
    close: () => {
      cut();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** Opens `base` + `path` in a new page that records what it requests and every error it meets. */
async function open(browser: BrowserContext, base: string, path: string): Promise<Opened> {
  const page = await browser.newPage();
  const opened: Opened = { page, foreign: [], failures: [], requests: [] };
  page.on('request', (request) => {
    const url = request.url();
    if (!url.startsWith(base) && !url.startsWith('data:')) opened.foreign.push(url);
    else
      opened.requests.push({
        method: request.method(),
        url: url.slice(base.length),
        authorization: request.headers().authorization,
      });
  });
  page.on('requestfailed', (request) => {
    // The page's own stream is cut when the test closes the browser: not a failure of the page.
    if (!request.url().includes('/_changes?') || request.failure()?.errorText !== 'net::ERR_ABORTED') opened.failures.push(request.url());
  });
  page.on('console', (message) => {
    if (message.type() === 'error') opened.failures.push(message.text());
  });
  page.on('pageerror', (error) => opened.failures.push(error.message));
  const response = await page.goto(`${base}${path}`);
  assert.is(response?.status(), 200);
  return opened;
}

/** Waits until the page's stream is in state `name` (connecting, live, reconnecting, needs a token, token rejected). */
const inState = (page: Page, name: string) => page.locator(`#state[data-state="${name}"]`).waitFor(WAIT);

/** The changes on the page, newest (top) first. */
const changes = (page: Page) => page.locator('#changes > li.change');

/** Waits until the page shows at least `n` changes. */
const showing = (page: Page, n: number) =>
  changes(page)
    .nth(n - 1)
    .waitFor(WAIT);

/** The changes on the page, top to bottom, as `op kind id`. */
const shown = (page: Page) =>
  changes(page).evaluateAll((items) =>
    items.map((li) => `${(li as HTMLElement).dataset.op} ${(li as HTMLElement).dataset.kind} ${(li as HTMLElement).dataset.id}`),
  );

/** The seqs on the page, top to bottom. */
const seqs = (page: Page) => changes(page).evaluateAll((items) => items.map((li) => Number((li as HTMLElement).dataset.seq)));

/** Sends a write and returns its JSON body, failing the test on any status but `status`. */
async function write(service: Service, method: string, path: string, status: number, body?: unknown, token?: string) {
  const reply = await service.request(method, path, { body, headers: token ? { authorization: `Bearer ${token}` } : {} });
  assert.is(reply.status, status, `${method} ${path}: ${reply.text}`);
  return reply.body;
}

const plain = suite<{ service: Service }>('/docs/changes in a browser, without authentication');

plain.before(async (ctx) => {
  ctx.service = await startService();
});
plain.after(async ({ service }) => service.close());

plain('is linked from /docs and served from local files under its strict policy', async ({ service }) => {
  await withBrowser(async (browser) => {
    const docs = await open(browser, service.url, '/docs');
    await docs.page.locator('.opblock-tag').first().waitFor(WAIT);
    await docs.page.getByRole('link', { name: 'Live change feed' }).click();
    await docs.page.waitForURL(`${service.url}/docs/changes`, WAIT);
    await inState(docs.page, 'live');
    // The page's own policy, asked for as a browser asks (any other Accept gets a text/plain pointer instead).
    const page = await service.request('GET', '/docs/changes', { headers: { accept: 'text/html' } });
    const policy = page.headers.get('content-security-policy') ?? '';
    for (const directive of ["default-src 'none'", "script-src 'self'", "connect-src 'self'", "form-action 'none'"])
      assert.ok(policy.includes(directive), `${directive} is not in ${policy}`);
    assert.not.ok(policy.includes('unsafe'), policy);
    assert.equal(docs.foreign, [], 'the page loaded something from outside the service');
    assert.equal(docs.failures, []);
  });
});

plain('shows each write as it happens, newest on top, with its op, kind, id and element', async ({ service }) => {
  await withBrowser(async (browser) => {
    const { page, foreign, failures, requests } = await open(browser, service.url, '/docs/changes');
    await inState(page, 'live');
    assert.ok(await page.locator('#auth').isHidden(), 'the token form shows on a service without authentication');
    assert.is(await changes(page).count(), 0);

    // Markup in a value is shown as text, never run or rendered.
    const name = 'Ada <img src=x id=injected>';
    const user = await write(service, 'POST', '/users', 201, { name, email: 'ada@example.com' });
    await showing(page, 1);
    const top = changes(page).first();
    assert.equal(await shown(page), [`create users ${user.id}`]);
    assert.is(await top.locator('.op').innerText(), 'create');
    assert.is(await top.locator('.kind').innerText(), 'users');
    assert.is(await top.locator('.id').innerText(), String(user.id));
    assert.match(await top.locator('.seq').innerText(), /^#\d+$/);
    assert.equal(JSON.parse(await top.locator('pre.element').innerText()), user);
    assert.is(await page.locator('#injected').count(), 0);

    const renamed = await write(service, 'PATCH', `/users/${user.id}`, 200, { name: 'Ada Lovelace' });
    await showing(page, 2);
    assert.equal(await shown(page), [`update users ${user.id}`, `create users ${user.id}`]);
    assert.equal(JSON.parse(await top.locator('pre.element').innerText()), renamed);

    await write(service, 'DELETE', `/users/${user.id}`, 204);
    await showing(page, 3);
    assert.equal(await shown(page), [`delete users ${user.id}`, `update users ${user.id}`, `create users ${user.id}`]);
    assert.is(await top.locator('pre.element').innerText(), '(no longer exists)');

    // A burst of writes, not waited for one by one: all arrive, in commit order.
    const pet = await write(service, 'POST', '/pets', 201, { name: 'Rex', species: 'dog' });
    await write(service, 'PATCH', `/pets/${pet.id}`, 200, { species: 'cat' });
    const [a, b] = await write(service, 'POST', '/users', 201, [
      { name: 'Bo', email: 'bo@example.com' },
      { name: 'Cy', email: 'cy@example.com' },
    ]);
    await write(service, 'DELETE', `/pets/${pet.id}`, 204);
    await showing(page, 8);
    assert.equal(await shown(page), [
      `delete pets ${pet.id}`,
      `create users ${b.id}`,
      `create users ${a.id}`,
      `update pets ${pet.id}`,
      `create pets ${pet.id}`,
      `delete users ${user.id}`,
      `update users ${user.id}`,
      `create users ${user.id}`,
    ]);
    const order = await seqs(page);
    assert.equal(
      order,
      [...order].sort((x, y) => y - x),
      'the seqs do not decrease from top to bottom',
    );
    const feed = await service.request('GET', '/_changes?limit=100');
    assert.equal(
      order,
      feed.body.map((change: { seq: number }) => change.seq).reverse(),
      'the page and GET /_changes list different changes',
    );
    assert.ok(
      requests.some((r) => r.url === '/_changes'),
      `the page did not open /_changes: ${JSON.stringify(requests)}`,
    );
    assert.not.ok(
      requests.some((r) => r.url.startsWith('/_changes/ticket')),
      'the page asked for a ticket on a service without authentication',
    );
    const dir = join(ROOT, 'test-output');
    mkdirSync(dir, { recursive: true });
    await page.screenshot({ path: join(dir, 'changes.png') });
    console.log(`\n  screenshot: ${join(dir, 'changes.png')}`);
    assert.equal(foreign, []);
    assert.equal(failures, []);
  });
});

plain('reconnects after the connection drops and shows the changes it missed, once each, in order', async ({ service }) => {
  const proxy = await createProxy(service.url);
  try {
    await withBrowser(async (browser) => {
      const { page, requests } = await open(browser, proxy.url, '/docs/changes');
      await inState(page, 'live');
      const first = await write(service, 'POST', '/users', 201, { name: 'Before', email: 'before@example.com' });
      await showing(page, 1);
      const [firstSeq] = await seqs(page);

      proxy.down(); // the connection drops, and the service stays out of reach until up()
      await inState(page, 'reconnecting');
      const missed = await write(service, 'POST', '/users', 201, [
        { name: 'Missed 1', email: 'missed-1@example.com' },
        { name: 'Missed 2', email: 'missed-2@example.com' },
      ]);
      await write(service, 'PATCH', `/users/${first.id}`, 200, { name: 'Renamed while away' });
      proxy.up();
      await inState(page, 'live');
      await showing(page, 4);
      await write(service, 'DELETE', `/users/${missed[0].id}`, 204);
      await showing(page, 5);
      assert.equal(await shown(page), [
        `delete users ${missed[0].id}`,
        `update users ${first.id}`,
        `create users ${missed[1].id}`,
        `create users ${missed[0].id}`,
        `create users ${first.id}`,
      ]);
      assert.ok(
        requests.some((r) => r.url === `/_changes?since=${firstSeq}`),
        `the page did not resume after #${firstSeq}: ${JSON.stringify(requests.map((r) => r.url))}`,
      );
    });
  } finally {
    await proxy.close();
  }
});

plain(`keeps only the newest ${CHANGES_SHOWN} changes`, async ({ service }) => {
  await withBrowser(async (browser) => {
    const { page, failures } = await open(browser, service.url, '/docs/changes');
    await inState(page, 'live');
    const rows = Array.from({ length: CHANGES_SHOWN + 5 }, (_, i) => ({ name: `Many ${i}`, email: `many-${i}@example.com` }));
    const created: { id: number }[] = await write(service, 'POST', '/users', 201, rows);
    // The newest is on top once the last one arrived; the oldest five are gone.
    await page.locator(`#changes > li.change:first-child[data-id="${created.at(-1)?.id}"]`).waitFor(WAIT);
    assert.is(await changes(page).count(), CHANGES_SHOWN);
    assert.is(await changes(page).last().getAttribute('data-id'), String(created[5]?.id));
    assert.equal(failures, []);
  });
});

plain.run();

const authed = suite<{ service: Service }>('/docs/changes in a browser, with AUTH_TOKEN set');

authed.before(async (ctx) => {
  ctx.service = await startService({ env: { AUTH_TOKEN: TOKEN } });
});
authed.after(async ({ service }) => service.close());

authed('asks for the token, opens the stream with a ticket and shows the changes', async ({ service }) => {
  await withBrowser(async (browser) => {
    const { page, foreign, failures, requests } = await open(browser, service.url, '/docs/changes');
    // Without a token the feed answers 401: the page says so and asks for one.
    await inState(page, 'needs a token');
    assert.ok(await page.locator('#auth').isVisible(), 'the token form is not shown');

    await page.locator('#token').fill('not-the-token-0123456789');
    await page.getByRole('button', { name: 'Connect' }).click();
    await inState(page, 'token rejected');

    await page.locator('#token').fill(TOKEN);
    await page.getByRole('button', { name: 'Connect' }).click();
    await inState(page, 'live');
    assert.ok(await page.locator('#auth').isHidden(), 'the token form is still shown');
    assert.is(await page.locator('#token').inputValue(), '', 'the token stays in the field');

    const user = await write(service, 'POST', '/users', 201, { name: 'Dee', email: 'dee@example.com' }, TOKEN);
    await showing(page, 1);
    const renamed = await write(service, 'PATCH', `/users/${user.id}`, 200, { name: 'Dee Dee' }, TOKEN);
    await showing(page, 2);
    assert.equal(JSON.parse(await changes(page).first().locator('pre.element').innerText()), renamed);
    await write(service, 'DELETE', `/users/${user.id}`, 204, undefined, TOKEN);
    await showing(page, 3);
    assert.equal(await shown(page), [`delete users ${user.id}`, `update users ${user.id}`, `create users ${user.id}`]);

    // The token went in headers only; the stream was opened with a ticket the page fetched with it.
    const ticket = requests.find((r) => r.url === '/_changes/ticket');
    assert.is(ticket?.authorization, `Bearer ${TOKEN}`, JSON.stringify(requests));
    const stream = requests.find((r) => /^\/_changes\?ticket=/.test(r.url));
    assert.ok(stream, `the page did not open /_changes with a ticket: ${JSON.stringify(requests)}`);
    assert.is(stream.authorization, undefined);
    assert.not.ok(
      requests.some((r) => r.url.includes(TOKEN)),
      'the token appeared in a URL',
    );
    assert.equal(foreign, []);
    // The 401s the page met on purpose (no token, then a wrong one) are the only errors it logged.
    assert.ok(
      failures.every((f) => /401/.test(f)),
      failures.join('\n'),
    );
  });
});

authed.run();
