// Group commit for SQLite: writes that arrive together run in one IMMEDIATE transaction, each in its
// own savepoint, and commit with one fsync; every write is answered only after that commit.
import type Database from 'better-sqlite3';

/** A unit of synchronous work run inside the group's transaction (its own savepoint). */
export type Work<T> = () => T;

/** What a write is refused with when its commit breaks a foreign key checked there (see createGroupCommit). */
export type RefusedAtCommit = (error: unknown) => unknown;

interface Pending {
  work: Work<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
  /** When the write stops waiting for a write lock another connection holds (Date.now() ms). */
  deadline: number;
  refused: RefusedAtCommit | undefined;
  /** Set once its group's commit broke a deferred foreign key: it runs in a transaction of its own. */
  alone: boolean;
}

/** A commit refused by a foreign key declared DEFERRABLE INITIALLY DEFERRED (only those are checked at commit). */
const brokeDeferredKey = (error: unknown) => (error as { code?: string }).code === 'SQLITE_CONSTRAINT_FOREIGNKEY';

/** The pause between two tries at a write lock another connection holds. */
const LOCK_RETRY_MS = 10;

export interface GroupCommitOptions {
  /** The most writes one transaction holds; a full group is committed at once. */
  maxGroup: number;
  /** The error every write of a group gets when its transaction cannot begin or commit (a 503). */
  unavailable: (error: unknown) => unknown;
  /**
   * How long a write waits for a write lock another connection holds (the connection's busy timeout,
   * restored after each try): the wait is between turns of the event loop, never inside SQLite.
   */
  lockWaitMs: number;
}

export interface GroupCommit {
  /**
   * Queues `work`; settles with its result or error once the group holding it has committed.
   * `refused` maps the error of a commit that `work` alone broke (a deferred foreign key) to the client's.
   */
  submit<T>(work: Work<T>, refused?: RefusedAtCommit): Promise<T>;
  /** Commits what is queued now (shutdown and tests); a no-op when nothing is. */
  flush(): void;
}

/**
 * The write queue of one connection. A group waits at most one turn of the event loop: the first
 * write of a group schedules its commit with setImmediate, so the writes whose bodies were read in
 * the same turn (every connection that was ready) join it, and none waits for a timer. While another
 * connection holds the write lock, the queue tries again every LOCK_RETRY_MS, and each write still
 * waiting `lockWaitMs` after it was queued gets `unavailable` (a 503); reads go on meanwhile.
 *
 * One write failing (a 409, 412 or 422 thrown by its work) rolls back to its savepoint only; the
 * others stay in the group. A failure of the transaction itself (BEGIN or COMMIT: disk full, I/O
 * error), or an error that makes SQLite roll the whole
 * transaction back, fails every write of the group with `unavailable`: none was acknowledged.
 * A foreign key declared DEFERRABLE INITIALLY DEFERRED is checked at COMMIT, not in the write's
 * savepoint: a commit it refuses rolls the group back, and its writes run again, each in a
 * transaction of its own, so that only the write that broke it is refused (with `refused`).
 */
export function createGroupCommit(sqlite: Database.Database, options: GroupCommitOptions): GroupCommit {
  let queue: Pending[] = [];
  let scheduled = false;
  /** Each write's own savepoint: better-sqlite3 nests a transaction function as SAVEPOINT/RELEASE. */
  const savepoint = sqlite.transaction((work: Work<unknown>) => work());
  const noWait = sqlite.prepare('PRAGMA busy_timeout = 0');
  const wait = sqlite.prepare(`PRAGMA busy_timeout = ${options.lockWaitMs}`);

  /** Runs a group; returns the SQLITE_BUSY error, having run nothing, when another connection holds the write lock. */
  function run(group: Pending[]): unknown {
    const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    let began = false;
    try {
      // BEGIN IMMEDIATE tries the lock once: a busy timeout would block the event loop (reads included) while it waits.
      noWait.run();
      sqlite
        .transaction(() => {
          began = true;
          for (const { work } of group) {
            try {
              outcomes.push({ ok: true, value: savepoint(work) });
            } catch (error) {
              // SQLite may have rolled the whole transaction back (SQLITE_FULL, SQLITE_IOERR…): nothing of the group stands.
              if (!sqlite.inTransaction) throw error;
              outcomes.push({ ok: false, error });
            }
          }
        })
        .immediate();
    } catch (error) {
      if (!began && (error as { code?: string }).code === 'SQLITE_BUSY') return error;
      if (outcomes.length === group.length && brokeDeferredKey(error)) {
        // Every write ran and the commit was refused: nothing stands, and none was answered.
        if (group.length > 1) {
          for (const pending of group) pending.alone = true;
          queue = [...group, ...queue];
        } else {
          const [pending] = group as [Pending];
          pending.reject(pending.refused ? pending.refused(error) : error);
        }
        return undefined;
      }
      const failure = options.unavailable(error) ?? error;
      for (const pending of group) pending.reject(failure);
      return undefined;
    } finally {
      if (sqlite.open) wait.run(); // a closed connection (shutdown) has no timeout to restore: its writes got its error
    }
    group.forEach((pending, i) => {
      const outcome = outcomes[i] as (typeof outcomes)[number];
      if (outcome.ok) pending.resolve(outcome.value);
      else pending.reject(outcome.error);
    });
    return undefined;
  }

  function flush(): void {
    scheduled = false;
    while (queue.length > 0) {
      const size = (queue[0] as Pending).alone ? 1 : Math.min(queue.length, options.maxGroup);
      const group = size < queue.length ? queue.splice(0, size) : queue;
      if (group === queue) queue = [];
      const busy = run(group);
      if (busy === undefined) continue;
      // Another connection holds the write lock: the writes wait for it between turns of the event loop,
      // each until its deadline, in their order.
      const now = Date.now();
      const failure = options.unavailable(busy) ?? busy;
      const waiting = [...group, ...queue];
      queue = [];
      for (const pending of waiting) {
        if (pending.deadline > now) queue.push(pending);
        else pending.reject(failure);
      }
      if (queue.length > 0 && !scheduled) {
        scheduled = true;
        setTimeout(flush, LOCK_RETRY_MS);
      }
      return;
    }
  }

  return {
    submit<T>(work: Work<T>, refused?: RefusedAtCommit): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        const deadline = Date.now() + options.lockWaitMs;
        queue.push({ work, resolve: resolve as (value: unknown) => void, reject, deadline, refused, alone: false });
        if (queue.length >= options.maxGroup) flush();
        else if (!scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      });
    },
    flush,
  };
}
