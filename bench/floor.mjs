// The floor: the least any Node server can do for the same answers as restable — node:http, one
// prepared better-sqlite3 statement per answer, JSON.stringify; writes commit at synchronous=NORMAL.
// Usage: DATABASE_PATH=… PORT=… node bench/floor.mjs
// FLOOR_CONTRACT=1 adds only what API.md and the README require of every answer, done the cheapest
// way known: an X-Request-Id (a new UUID), the four security headers, a SHA-1 ETag on elements and
// one JSON log line per request (batched, written asynchronously). It measures what the contract
// itself costs on node:http, whatever the code around it. FLOOR_CONTRACT=headers: all of it but the log line.
import { hash, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import Database from 'better-sqlite3';
import pino from 'pino';

const db = new Database(process.env.DATABASE_PATH, { timeout: 5000 });
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.pragma('foreign_keys = ON');

const USER = 'id, name, email, created_at AS createdAt, updated_at AS updatedAt';
const PET = 'id, name, species, owner_id AS ownerId, created_at AS createdAt, updated_at AS updatedAt';
const getUser = db.prepare(`SELECT ${USER} FROM users WHERE id = ?`);
const firstPage = db.prepare(`SELECT ${USER} FROM users ORDER BY id LIMIT 100`);
const petsOf = db.prepare(`SELECT ${PET} FROM pets WHERE owner_id = ? ORDER BY id LIMIT 100`);
const insertUser = db.prepare(`INSERT INTO users (name, email, created_at, updated_at) VALUES (?, ?, ?, ?) RETURNING ${USER}`);
const renameUser = db.prepare(`UPDATE users SET name = ?, updated_at = ? WHERE id = ? RETURNING ${USER}`);

const CONTRACT = process.env.FLOOR_CONTRACT === '1' || process.env.FLOOR_CONTRACT === 'headers';
const LOGGING = process.env.FLOOR_CONTRACT === '1';
const SECURITY = [
  'X-Content-Type-Options',
  'nosniff',
  'X-Frame-Options',
  'DENY',
  'Referrer-Policy',
  'no-referrer',
  'Content-Security-Policy',
  "default-src 'none'; frame-ancestors 'none'",
];
const log = LOGGING ? pino.destination({ dest: 1, sync: false }) : undefined;
let pending = '';
const flush = () => {
  if (pending !== '') log.write(pending);
  pending = '';
};
if (LOGGING) setInterval(flush, 100).unref();

function send(res, status, value, headers = {}, element = false) {
  const body = JSON.stringify(value);
  if (!CONTRACT) {
    res.writeHead(status, { ...headers, 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
    return;
  }
  const id = randomUUID();
  const list = [
    'X-Request-Id',
    id,
    ...SECURITY,
    'Content-Type',
    'application/json; charset=utf-8',
    'Content-Length',
    Buffer.byteLength(body),
  ];
  for (const name in headers) list.push(name, headers[name]);
  if (element && status < 300) list.push('ETag', `"${hash('sha1', body, 'base64url')}"`);
  res.writeHead(status, list);
  res.end(body);
  if (!LOGGING) return;
  const path = JSON.stringify(res.req.url.split('?')[0]);
  pending += `{"level":30,"time":${Date.now()},"service":"restable","requestId":"${id}","req":{"method":"${res.req.method}","path":${path}},"res":{"status":${status}},"durationMs":${Math.round((performance.now() - res.startedAt) * 100) / 100},"msg":"${res.req.method} ${path.slice(1, -1)} ${status}"}\n`;
  if (pending.length >= 32768) flush();
}

function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
  });
}

const server = createServer(async (req, res) => {
  if (CONTRACT) res.startedAt = performance.now();
  const [path] = req.url.split('?');
  const parts = path.split('/');
  if (parts[1] !== 'users') return send(res, 404, { status: 404 });
  const id = parts[2] === undefined ? undefined : Number(parts[2]);
  // HEAD is answered as GET: node:http sends the headers (Content-Length included) and drops the body.
  const method = req.method === 'HEAD' ? 'GET' : req.method;
  if (method === 'GET' && id === undefined) return send(res, 200, firstPage.all());
  if (method === 'GET' && parts[3] === 'pets') {
    if (!getUser.get(id)) return send(res, 404, { status: 404 });
    return send(res, 200, petsOf.all(id));
  }
  if (method === 'GET') {
    const row = getUser.get(id);
    return row ? send(res, 200, row, {}, true) : send(res, 404, { status: 404 });
  }
  if (req.method === 'POST' && id === undefined) {
    const body = await readBody(req);
    const now = new Date().toISOString();
    const row = insertUser.get(body.name, body.email, now, now);
    return send(res, 201, row, { Location: `/users/${row.id}` }, true);
  }
  if (req.method === 'PATCH') {
    const body = await readBody(req);
    const row = renameUser.get(body.name, new Date().toISOString(), id);
    return row ? send(res, 200, row, {}, true) : send(res, 404, { status: 404 });
  }
  send(res, 405, { status: 405 });
});
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  console.log(`floor listening on http://127.0.0.1:${server.address().port}`);
});
process.on('SIGTERM', () =>
  server.close(() => {
    db.close();
    if (log) {
      flush();
      log.flushSync();
    }
  }),
);
