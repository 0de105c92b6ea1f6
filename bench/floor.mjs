// The floor: the least any Node server can do for the same answers as restable — node:http, one
// prepared better-sqlite3 statement per answer, JSON.stringify; writes commit at synchronous=NORMAL.
// Usage: DATABASE_PATH=… PORT=… node bench/floor.mjs
import { createServer } from 'node:http';
import Database from 'better-sqlite3';

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

function send(res, status, value, headers = {}) {
  const body = JSON.stringify(value);
  res.writeHead(status, { ...headers, 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
  });
}

const server = createServer(async (req, res) => {
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
    return row ? send(res, 200, row) : send(res, 404, { status: 404 });
  }
  if (req.method === 'POST' && id === undefined) {
    const body = await readBody(req);
    const now = new Date().toISOString();
    const row = insertUser.get(body.name, body.email, now, now);
    return send(res, 201, row, { Location: `/users/${row.id}` });
  }
  if (req.method === 'PATCH') {
    const body = await readBody(req);
    const row = renameUser.get(body.name, new Date().toISOString(), id);
    return row ? send(res, 200, row) : send(res, 404, { status: 404 });
  }
  send(res, 405, { status: 405 });
});
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  console.log(`floor listening on http://127.0.0.1:${server.address().port}`);
});
process.on('SIGTERM', () => server.close(() => db.close()));
