// Collection latency at growing sizes (issues 3 and 15): fills users, pets and orders with N rows each, starts
// the compiled service on that file, and reports median latencies of paging, filters, counts, fields=, expand= and q=.
// Usage: npm run bench:collections -- [--sizes 10000,100000,1000000] [--samples 200] [--warmup 200]
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { closeDatabase, openDatabase } from '../src/engine/sqlite/connection.js';
import { applyMigrations } from '../src/engine/sqlite/migrate.js';
import { startService } from './service.js';

const { values: args } = parseArgs({
  options: {
    sizes: { type: 'string', default: '10000,100000,1000000' },
    samples: { type: 'string', default: '200' },
    warmup: { type: 'string', default: '200' },
  },
});
const sizes = (args.sizes as string).split(',').map(Number);
const samples = Number(args.samples);
/** Unmeasured requests before each series: without them the smallest size, whose walk to the end is short, ran colder code. */
const warmup = Number(args.warmup);
const agent = new Agent({ keepAlive: true, maxSockets: 1 });

type Row = Record<string, unknown>;
type Reply = { status: number; link?: string; total?: string; body: string; ms: number };

/** One GET; the time stops when the last byte has arrived, so checking the body afterwards costs nothing. */
function get(base: string, path: string): Promise<Reply> {
  const start = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    request(base + path, { agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const ms = Number(process.hrtime.bigint() - start) / 1e6;
        const { link, 'x-total-count': total } = res.headers as Record<string, string | undefined>;
        resolve({ status: res.statusCode ?? 0, link, total, body: Buffer.concat(chunks).toString(), ms });
      });
    })
      .on('error', reject)
      .end();
  });
}

/**
 * Median latency of `samples` sequential requests. Every answer must be a 200 and pass `check`
 * (the page's elements): a broken run stops here, loudly, instead of printing fast numbers.
 */
async function median(base: string, path: () => string, check?: (page: Row[], path: string) => void): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < warmup + samples; i++) {
    const url = path();
    const reply = await get(base, url);
    if (reply.status !== 200) throw new Error(`${url} answered ${reply.status}: ${reply.body.slice(0, 300)}`);
    if (check) check(JSON.parse(reply.body) as Row[], url);
    if (i >= warmup) times.push(reply.ms);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)] as number;
}

function fail(path: string, why: string): never {
  throw new Error(`${path}: ${why}`);
}

/** A full page of `size` elements, each carrying exactly `fields` when given. */
function pageOf(size: number, fields?: string[]): (page: Row[], path: string) => void {
  return (page, path) => {
    if (!Array.isArray(page) || page.length !== size)
      fail(path, `expected ${size} elements, got ${Array.isArray(page) ? page.length : typeof page}`);
    if (fields)
      for (const row of page) if (Object.keys(row).join() !== fields.join()) fail(path, `fields ${Object.keys(row)} instead of ${fields}`);
  };
}

/** Pages of `size` orders with `user` and `pet` expanded: each present, and the one its foreign key names. */
const ordersWithUserAndPet = (size: number) => (page: Row[], path: string) => {
  pageOf(size)(page, path);
  for (const order of page) {
    const user = order.user as Row | null | undefined;
    const pet = order.pet as Row | null | undefined;
    if (!user || user.id !== order.userId) fail(path, `order ${order.id} has user ${JSON.stringify(user)}, userId ${order.userId}`);
    if (!pet || pet.id !== order.petId) fail(path, `order ${order.id} has pet ${JSON.stringify(pet)}, petId ${order.petId}`);
  }
};

/** Users with `orders` expanded: an array of that user's orders on each, and orders on some of them. */
function usersWithOrders(page: Row[], path: string): void {
  pageOf(100)(page, path);
  let children = 0;
  for (const user of page) {
    const orders = user.orders as Row[] | undefined;
    if (!Array.isArray(orders)) fail(path, `user ${user.id} has no orders array`);
    for (const order of orders) if (order.userId !== user.id) fail(path, `user ${user.id} lists order ${order.id} of user ${order.userId}`);
    children += orders.length;
  }
  if (children === 0) fail(path, 'no user on the page has an order');
}

/**
 * Users' names for search: a first and a last name from 100 each, by i (first i mod 100, last
 * ⌊i/100⌋ mod 100), so one word matches 1 % of the users and a first and last name together
 * 0.01 %; the rare middle name is on 10 users at any size. No word is a prefix of another, so a
 * query's last word (searched as a prefix) matches exactly the rows that hold it.
 */
const FIRST = (
  'Olivia Liam Emma Noah Amelia Oliver Sophia Elijah Isabella Mateo Mia Lucas Evelyn Levi Harper Ezra Luna Asher Camila ' +
  'James Gianna Leo Elizabeth Eleanor Ethan Ella Muhammad Abigail Sebastian Sofia Hudson Avery Benjamin Scarlett Emily ' +
  'Henry Aria Michael Penelope Owen Chloe Maverick Layla Daniel Mila Wyatt Nora Gabriel Hazel Julian Madison Theodore ' +
  'Ellie Samuel Lily Jackson Nova Aiden Isla Grayson Grace Santiago Violet Carter Aurora David Riley Joseph Zoey Jayden ' +
  'Willow Josiah Emilia Isaac Stella Kai Miles Victoria Rowan Hannah Carson Addison Dylan Leah Thomas Lucy Adrian Eliana ' +
  'Roman Ivy Nathan Everly Christopher Lillian Caleb Paisley Ezekiel Naomi Felix Quinn'
).split(' ');
const LAST = (
  'Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez Wilson Anderson ' +
  'Taylor Moore Lee Perez Thompson White Harris Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright ' +
  'Scott Torres Nguyen Hill Flores Green Adams Nelson Baker Hall Rivera Campbell Mitchell Roberts Gomez Phillips Evans ' +
  'Turner Diaz Parker Cruz Edwards Collins Reyes Stewart Morris Morales Murphy Cook Rogers Gutierrez Ortiz Morgan ' +
  'Cooper Peterson Bailey Reed Kelly Howard Ramos Kim Cox Ward Richardson Watson Brooks Chavez Wood Bennett Mendoza ' +
  'Ruiz Hughes Price Alvarez Castillo Sanders Patel Myers Long Ross Foster Jimenez Powell Jenkins Perry Russell Sullivan Barnes'
).split(' ');
const RARE = 'Zebulon';
const words = [...FIRST, ...LAST, RARE].map((w) => w.toLowerCase());
if (FIRST.length !== 100 || LAST.length !== 100) throw new Error(`name lists of ${FIRST.length} and ${LAST.length}, not 100`);
for (const a of words) for (const b of words) if (a !== b && b.startsWith(a)) throw new Error(`${a} is a prefix of ${b}`);

/** Every tenth of the table gets the rare middle name: 10 users at any size. */
const rareStep = (rows: number) => Math.max(1, Math.floor(rows / 10));

/** User i's name, as fill() writes it in SQL. */
function nameOf(i: number, rows: number): string {
  const middle = i % rareStep(rows) === 0 ? ` ${RARE}` : '';
  return `${FIRST[i % 100]}${middle} ${LAST[Math.floor(i / 100) % 100]}`;
}

/** The rule of API.md §5 "Search" on ASCII names: every word of `q` is a word of the name, case-insensitive, the last one a prefix. */
function matches(name: string, q: string): boolean {
  const have = name.toLowerCase().split(/[^a-z0-9]+/);
  const want = q.toLowerCase().split(' ');
  return want.every((word, n) => have.some((w) => (n === want.length - 1 ? w.startsWith(word) : w === word)));
}

/** Pages of users found by `q`: `size` of them, every name matching. */
const usersFound = (q: string, size: number) => (page: Row[], path: string) => {
  pageOf(size)(page, path);
  for (const user of page)
    if (!matches(String(user.name), q)) fail(path, `user ${user.id} named ${JSON.stringify(user.name)} does not match ${q}`);
};

/**
 * N users, N pets (pet i belongs to user i) and N orders (order i: a scattered user and that user's
 * pet, so a page of orders names users all over the table), in one transaction of INSERT … SELECT
 * over a generated series: a million rows of each in seconds.
 */
async function fill(path: string, rows: number): Promise<void> {
  const database = openDatabase(path);
  await applyMigrations(database);
  const now = new Date().toISOString();
  // 7919 is prime: i ↦ (i·7919 mod N) + 1 is a permutation of 1..N unless N is a multiple of it.
  const series = 'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < @rows)';
  const scattered = rows % 7919 === 0 ? 'i' : '(i * 7919) % @rows + 1';
  database.sqlite.transaction(() => {
    database.sqlite
      .prepare(`${series} INSERT INTO users (id, name, email, created_at, updated_at)
        SELECT i, json_extract(@first, '$[' || (i % 100) || ']') || CASE WHEN i % @rare = 0 THEN ' ${RARE}' ELSE '' END
          || ' ' || json_extract(@last, '$[' || ((i / 100) % 100) || ']'), 'user' || i || '@example.com', @now, @now FROM n`)
      .run({ rows, now, first: JSON.stringify(FIRST), last: JSON.stringify(LAST), rare: rareStep(rows) });
    database.sqlite
      .prepare(`${series} INSERT INTO pets (id, name, species, owner_id, created_at, updated_at)
        SELECT i, 'pet ' || (i % 1000), CASE i % 5 WHEN 0 THEN 'cat' WHEN 1 THEN 'dog' WHEN 2 THEN 'bird' WHEN 3 THEN 'fish' ELSE 'other' END,
          i, @now, @now FROM n`)
      .run({ rows, now });
    database.sqlite
      .prepare(`${series} INSERT INTO orders (id, user_id, pet_id, status, quantity, created_at, updated_at)
        SELECT i, ${scattered}, ${scattered}, 'placed', 1 + i % 3, @now, @now FROM n`)
      .run({ rows, now });
  })();
  const sample = database.sqlite.prepare('SELECT name FROM users WHERE id = ?').pluck();
  for (const i of [1, 2, rareStep(rows), rows])
    if (sample.get(i) !== nameOf(i, rows)) throw new Error(`user ${i}: SQL and nameOf disagree`);
  closeDatabase(database);
}

/** Walks `collection` to the end with the largest pages and returns the cursor of the last one. */
async function cursorNearEnd(base: string, collection: string): Promise<string> {
  let next: string | undefined = `/${collection}?limit=1000`;
  let last = '';
  while (next) {
    const reply = await get(base, next);
    if (reply.status !== 200) throw new Error(`${next} answered ${reply.status}: ${reply.body.slice(0, 300)}`);
    const link = reply.link && /<([^>]+)>/.exec(reply.link)?.[1];
    if (link) last = new URL(link, base).searchParams.get('cursor') as string;
    next = link;
  }
  return last;
}

const results: string[][] = [];
const shaping: string[][] = [];
const ratios: number[] = [];
const searching: string[][] = [];
/** The words searched: a first name (1 %), with a last name (0.01 %), and the rare middle name (10 users). */
const ONE = 'emma';
const TWO = 'emma garcia';
const FEW = RARE.toLowerCase();
for (const rows of sizes) {
  const dir = mkdtempSync(join(tmpdir(), 'restable-bench-'));
  const file = join(dir, 'bench.db');
  process.stderr.write(`filling ${rows} users, pets and orders… `);
  const filling = process.hrtime.bigint();
  await fill(file, rows);
  const filled = Number(process.hrtime.bigint() - filling) / 1e9;
  const service = await startService({ DATABASE_PATH: file });
  process.stderr.write('walking to the end… ');
  const cursor = await cursorNearEnd(service.base, 'users');
  const ordersCursor = await cursorNearEnd(service.base, 'orders');
  process.stderr.write('measuring\n');
  // The last cursor of a walk by 1000 starts the last (partial) page of 1000.
  const deepSize = Math.min(100, rows - 1000 * (Math.ceil(rows / 1000) - 1));
  const first = await median(service.base, () => '/users', pageOf(100));
  const deep = await median(service.base, () => `/users?cursor=${cursor}`, pageOf(deepSize));
  let n = 0;
  const filter = await median(service.base, () => `/users?email=user${((n++ * 7919) % rows) + 1}@example.com`, pageOf(1));
  const count = await median(service.base, () => '/users?count=true', pageOf(100));
  results.push([rows.toLocaleString('en'), ...[first, deep, filter, count].map((ms) => ms.toFixed(2)), (deep / first).toFixed(2)]);

  // Issue 15: fields= and expand=, each against the same page without them.
  const orders = await median(service.base, () => '/orders?limit=100', pageOf(100));
  const ordersExpanded = await median(service.base, () => '/orders?limit=100&expand=user,pet', ordersWithUserAndPet(100));
  const usersFull = await median(service.base, () => '/users?limit=100', pageOf(100));
  const usersFields = await median(service.base, () => '/users?limit=100&fields=id,name', pageOf(100, ['id', 'name']));
  const usersExpanded = await median(service.base, () => '/users?limit=100&expand=orders', usersWithOrders);
  const deepExpanded = await median(
    service.base,
    () => `/orders?limit=100&expand=user,pet&cursor=${ordersCursor}`,
    ordersWithUserAndPet(deepSize),
  );
  ratios.push(ordersExpanded / orders);
  shaping.push([
    rows.toLocaleString('en'),
    ...[orders, ordersExpanded].map((ms) => ms.toFixed(2)),
    `${(ordersExpanded / orders).toFixed(2)}×`,
    deepExpanded.toFixed(2),
    ...[usersFull, usersFields].map((ms) => ms.toFixed(2)),
    `${(usersFields / usersFull).toFixed(2)}×`,
    usersExpanded.toFixed(2),
    `${(usersExpanded / usersFull).toFixed(2)}×`,
  ]);

  // Full-text search (API.md §5): each query's count is checked once against the names generated,
  // then its first page is timed next to the plain one, every answer checked.
  const found: Record<string, number> = {};
  for (const q of [ONE, TWO, FEW]) {
    let expected = 0;
    for (let i = 1; i <= rows; i++) if (matches(nameOf(i, rows), q)) expected++;
    const reply = await get(service.base, `/users?q=${encodeURIComponent(q)}&count=true&limit=1`);
    if (reply.status !== 200 || reply.total !== String(expected))
      fail(`q=${q}`, `answered ${reply.status} with X-Total-Count ${reply.total}, expected ${expected}`);
    found[q] = expected;
  }
  const searchPage = (q: string) => Math.min(100, found[q] as number);
  const q = (words: string) => encodeURIComponent(words);
  const plain = await median(service.base, () => '/users', pageOf(100));
  const one = await median(service.base, () => `/users?q=${q(ONE)}`, usersFound(ONE, searchPage(ONE)));
  const two = await median(service.base, () => `/users?q=${q(TWO)}`, usersFound(TWO, searchPage(TWO)));
  const ranked = await median(service.base, () => `/users?q=${q(ONE)}&sort=relevance`, usersFound(ONE, searchPage(ONE)));
  const rare = await median(service.base, () => `/users?q=${q(FEW)}`, usersFound(FEW, searchPage(FEW)));
  const withCount = (ms: number, words: string) => `${ms.toFixed(2)} (${(found[words] as number).toLocaleString('en')})`;
  searching.push([
    rows.toLocaleString('en'),
    filled.toFixed(1),
    plain.toFixed(2),
    withCount(one, ONE),
    withCount(two, TWO),
    withCount(ranked, ONE),
    withCount(rare, FEW),
  ]);
  await service.stop();
  rmSync(dir, { recursive: true, force: true });
}
agent.destroy();

const markdown = (header: string[], body: string[][]) =>
  [header, header.map(() => '---'), ...body].map((r) => `| ${r.join(' | ')} |`).join('\n');
console.log(
  `\nMedian of ${samples} sequential requests after ${warmup} unmeasured ones, pages of 100; node ${process.version}, ${cpus()[0]?.model ?? 'unknown CPU'}\n`,
);
console.log(markdown(['rows', 'first page (ms)', 'deep page (ms)', 'email= filter (ms)', 'count=true (ms)', 'deep / first'], results));
console.log('\nfields= and expand= (N users, N pets, N orders):\n');
console.log(
  markdown(
    [
      'rows',
      'orders (ms)',
      'orders expand=user,pet (ms)',
      'expand / plain',
      'deep orders expand=user,pet (ms)',
      'users (ms)',
      'users fields=id,name (ms)',
      'fields / full',
      'users expand=orders (ms)',
      'expand / plain',
    ],
    shaping,
  ),
);
console.log(`\nq= full-text search on users.name (N users; in brackets: how many users match):\n`);
console.log(
  markdown(
    ['rows', 'fill (s)', 'first page (ms)', `q=${ONE} (ms)`, `q=${TWO} (ms)`, `q=${ONE}&sort=relevance (ms)`, `q=${FEW} (ms)`],
    searching,
  ),
);
// Issue 15's target: expand=user,pet on a first page of 100 orders costs at most 3× the plain page.
const worst = Math.max(...ratios);
console.log(`\norders expand=user,pet / plain first page: worst ${worst.toFixed(2)}× (target ≤ 3×): ${worst <= 3 ? 'met' : 'NOT met'}`);
