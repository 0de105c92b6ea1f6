// A connection of the PostgreSQL pool for one piece of work: in a transaction when asked, run again
// after a serialization failure or a deadlock, given back to the pool unless it broke.
import type pg from 'pg';
import { afterRetries, isRetryable, isUnavailable, pgUnavailableFrom } from './errors.js';

/** A transaction that lost a serialization race or a deadlock is run again this many times in all, then a 503. */
const MAX_ATTEMPTS = 3;

/**
 * Runs `work` on a connection of the pool, in a transaction when asked; a serialization failure or
 * a deadlock runs it again, up to MAX_ATTEMPTS. The connection goes back to the pool unless it broke
 * (pool.query would close it after any error: a 409 would then cost a new connection and its
 * prepared statements).
 */
export async function withConnection<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>, transaction = false): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (error) {
      throw pgUnavailableFrom(error) ?? error;
    }
    let broken: Error | undefined;
    try {
      if (!transaction) return await work(client);
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      if (error instanceof Error && isUnavailable(error)) broken = error;
      else if (transaction) await client.query('ROLLBACK').catch((e: Error) => (broken = e));
      if (isRetryable(error) && attempt < MAX_ATTEMPTS) continue;
      throw afterRetries(error);
    } finally {
      client.release(broken);
    }
  }
}
