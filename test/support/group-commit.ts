// Helpers of the group-commit suites (group-commit.test.ts, group-commit.faults.ts): a burst of
// writes that reach the service together and whole-table reads of the SQLite file.
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import * as assert from 'uvu/assert';
import { inspect, request } from './helpers.js';

export type Row = Record<string, any>;

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface Write {
  method: string;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  /** The parsed JSON body, or undefined when there is none. */
  body: any;
}

/**
 * Sends every write on its own connection so that all of them become complete at the same moment:
 * headers and all but the last byte of each body go first, then, once every one has been handed to
 * the kernel, the last bytes leave in one synchronous loop. The service so sees many complete writes
 * at once, which is when a group commit gathers them; a service that commits one by one must answer
 * the same. Resolves with the answers in the order of `writes`.
 */
export async function burst(base: string, writes: Write[]): Promise<Answer[]> {
  const releases: (() => void)[] = [];
  const sent: Promise<void>[] = [];
  const answers = writes.map(
    (write) =>
      new Promise<Answer>((resolve, reject) => {
        const payload = write.body === undefined ? undefined : Buffer.from(JSON.stringify(write.body));
        const headers: Record<string, string> = { ...write.headers };
        if (payload) {
          headers['content-type'] ??= 'application/json';
          headers['content-length'] = String(payload.length);
        }
        const req = httpRequest(new URL(write.path, base), { method: write.method, headers, agent: false });
        req.on('error', reject);
        req.on('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let body: unknown;
            try {
              body = text ? JSON.parse(text) : undefined;
            } catch {
              body = undefined;
            }
            resolve({ status: res.statusCode as number, headers: res.headers, text, body });
          });
        });
        if (payload && payload.length > 1) {
          req.flushHeaders();
          sent.push(new Promise<void>((done) => req.write(payload.subarray(0, -1), () => done())));
          releases.push(() => req.end(payload.subarray(-1)));
        } else {
          // Without a body (DELETE) or with one byte: the whole request leaves with the others.
          releases.push(() => (payload ? req.end(payload) : req.end()));
        }
      }),
  );
  await Promise.all(sent);
  // Not a timing assertion: a moment for the service to read what was sent, so the last bytes find
  // every request parsed and waiting. Without it the writes still arrive close together.
  await sleep(100);
  for (const release of releases) release();
  return Promise.all(answers);
}

/** Every element of a collection through the API, following the `Link: rel="next"` pages. */
export async function listAll(base: string, path: string): Promise<Row[]> {
  const rows: Row[] = [];
  for (let next: string | undefined = `${path}${path.includes('?') ? '&' : '?'}limit=1000`; next; ) {
    const reply = await request(base, 'GET', next);
    assert.is(reply.status, 200, reply.text);
    rows.push(...reply.body);
    next = /<([^>]+)>;\s*rel="next"/.exec(reply.headers.get('link') ?? '')?.[1];
  }
  return rows;
}

/** The users and pets rows of a database file as the API represents them (timestamps are stored as ISO text), by id. */
export function readFile(path: string): { users: Map<number, Row>; pets: Map<number, Row>; integrity: string; foreignKeys: unknown[] } {
  return inspect(path, (db) => {
    const users = db
      .prepare('SELECT id, name, email, created_at AS createdAt, updated_at AS updatedAt FROM users ORDER BY id')
      .all() as Row[];
    const pets = db
      .prepare('SELECT id, name, species, owner_id AS ownerId, created_at AS createdAt, updated_at AS updatedAt FROM pets ORDER BY id')
      .all() as Row[];
    return {
      users: new Map(users.map((row) => [row.id as number, row])),
      pets: new Map(pets.map((row) => [row.id as number, row])),
      integrity: db.pragma('integrity_check', { simple: true }) as string,
      foreignKeys: db.pragma('foreign_key_check') as unknown[],
    };
  });
}
