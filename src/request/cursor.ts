// Paging cursors: a position (the sort values of a page's last row) sealed with a truncated
// HMAC-SHA256 over the list it belongs to, so an edited or foreign cursor is detected; and its key.
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { secrets } from '../db/internal-schema.js';
import type { Db } from '../engine/sqlite/connection.js';

/**
 * A text sort value too long to carry in a cursor: only its digest travels, and the next page
 * reads the value back from the row (found by rowid) after checking the digest still matches.
 */
export class Digest {
  constructor(readonly digest: string) {}
}

export type CursorValue = string | number | boolean | null | Digest;

/**
 * Where the next page starts: after the row with these sort values (and this rowid, when a value is
 * a Digest); or, for a kind without a key, at this position (no values).
 */
export interface Position {
  values: CursorValue[];
  rowid?: number;
  offset?: number;
}

/** Text sort values longer than this (UTF-8 bytes) travel as a Digest, so a cursor stays short. */
export const MAX_CARRIED_BYTES = 64;
const MAC_CHARS = 22; // 16 bytes of HMAC-SHA256 in base64url: 128 bits is plenty against forgery
const VERSION = 'restable-cursor-1';
const BASE64URL = /^[A-Za-z0-9_-]+$/;
export const CURSOR_SECRET_NAME = 'cursor';

/** A short digest of a long text value (not secret: the MAC protects the cursor that carries it). */
export function digestOf(text: string): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, 16);
}

/**
 * A sort value as a cursor carries it: long text as its Digest, dates as ISO 8601. A key's value
 * travels `whole`: the next page cannot read a key back by the key (nor by rowid without one).
 */
export function toCursorValue(value: unknown, whole = false): CursorValue {
  if (value instanceof Date) return value.toISOString();
  if (!whole && typeof value === 'string' && Buffer.byteLength(value) > MAX_CARRIED_BYTES) return new Digest(digestOf(value));
  return value as CursorValue;
}

export interface CursorCodec {
  /** The opaque cursor for `position` in the list named by `binding`. */
  seal(binding: string, position: Position): string;
  /** The position a cursor holds, or undefined when it was not sealed by this key for `binding`. */
  open(binding: string, cursor: string): Position | undefined;
}

function isCursorValue(value: unknown): boolean {
  if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) return true;
  return typeof value === 'object' && typeof (value as { h?: unknown }).h === 'string' && Object.keys(value).length === 1;
}

/**
 * Seals and opens cursors with the key `key()` returns (asked for once, on first use).
 * A cursor is the MAC (22 characters) followed by the base64url JSON of the position.
 */
export function createCursorCodec(key: () => Buffer): CursorCodec {
  let secret: Buffer | undefined;
  const keyOnce = () => {
    secret ??= key();
    return secret;
  };
  const mac = (binding: string, payload: string) =>
    createHmac('sha256', keyOnce()).update(`${VERSION}\n${binding}\n${payload}`).digest('base64url').slice(0, MAC_CHARS);
  return {
    seal(binding, { values, rowid, offset }) {
      const v = values.map((value) => (value instanceof Digest ? { h: value.digest } : value));
      const payload = Buffer.from(JSON.stringify({ v, r: rowid, o: offset })).toString('base64url');
      return mac(binding, payload) + payload;
    },
    open(binding, cursor) {
      if (cursor.length <= MAC_CHARS || !BASE64URL.test(cursor)) return undefined;
      const payload = cursor.slice(MAC_CHARS);
      const expected = Buffer.from(mac(binding, payload));
      if (!timingSafeEqual(expected, Buffer.from(cursor.slice(0, MAC_CHARS)))) return undefined;
      let decoded: { v?: unknown; r?: unknown; o?: unknown };
      try {
        decoded = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) ?? {};
      } catch {
        return undefined;
      }
      const { v, r, o } = decoded;
      if (!Array.isArray(v) || !v.every(isCursorValue) || !(r === undefined || Number.isSafeInteger(r))) return undefined;
      if (!(o === undefined || (Number.isSafeInteger(o) && (o as number) >= 0))) return undefined;
      const values = v.map((value) => (value !== null && typeof value === 'object' ? new Digest(value.h) : value));
      return { values, ...(r !== undefined && { rowid: r as number }), ...(o !== undefined && { offset: o as number }) };
    },
  };
}

/**
 * The cursor key: CURSOR_SECRET when configured, else a random key generated once and kept in
 * the database (insert-if-absent, then read back), so every process serving it, before and after
 * a restart, signs and accepts the same cursors. Reads first, so a read-only file that has its
 * key needs no write.
 */
export function readCursorKey(db: Db, configured: string | undefined): Buffer {
  if (configured !== undefined) return Buffer.from(configured, 'utf8');
  const stored = () => db.select({ value: secrets.value }).from(secrets).where(eq(secrets.name, CURSOR_SECRET_NAME)).get()?.value;
  let value = stored();
  if (value === undefined) {
    db.insert(secrets)
      .values({ name: CURSOR_SECRET_NAME, value: randomBytes(32).toString('base64url') })
      .onConflictDoNothing()
      .run();
    value = stored() as string;
  }
  return Buffer.from(value, 'base64url');
}
