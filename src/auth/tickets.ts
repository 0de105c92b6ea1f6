// Short-lived tickets for the change feed: a browser's EventSource cannot send an Authorization
// header, so it opens GET /_changes?ticket=… with a ticket that GET /_changes/ticket handed out.
import { createHmac, timingSafeEqual } from 'node:crypto';

/** How long a ticket opens streams: long enough to open one, short enough not to matter if it leaks. */
export const TICKET_TTL_MS = 60_000;

export interface Tickets {
  /** A new ticket and when it expires (ISO 8601). */
  issue(): { ticket: string; expiresAt: string };
  /** Whether `ticket` was issued by a process holding the same key and has not expired. */
  valid(ticket: string): boolean;
}

/**
 * Tickets are `<expiry in ms, base 36>.<HMAC-SHA-256 of it>`, signed with `key` (the key that signs
 * paging cursors, shared by every process and instance serving the database): nothing is stored,
 * and any instance accepts a ticket another one issued.
 */
export function createTickets(key: () => Buffer, now: () => number = Date.now): Tickets {
  const sign = (expiry: string) => createHmac('sha256', key()).update(`restable change-feed ticket ${expiry}`).digest();
  return {
    issue() {
      const expires = now() + TICKET_TTL_MS;
      const expiry = expires.toString(36);
      return { ticket: `${expiry}.${sign(expiry).toString('base64url')}`, expiresAt: new Date(expires).toISOString() };
    },
    valid(ticket) {
      const match = /^([0-9a-z]{1,12})\.([\w-]{43})$/.exec(ticket);
      if (!match) return false;
      const [, expiry, signature] = match as unknown as [string, string, string];
      if (Number.parseInt(expiry, 36) <= now()) return false;
      return timingSafeEqual(Buffer.from(signature, 'base64url'), sign(expiry));
    },
  };
}
