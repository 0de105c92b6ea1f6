// Helpers of the change-feed suites (changes.test.ts, and those that run several processes or instances on one database
// (changes-processes.test.ts, changes-instances.pg.ts)): concurrent writers that keep a ledger of
// what each acknowledged write must have recorded, element by element; readers that walk the feed
// while they write; an event-stream client; and the comparison of a feed with the ledger and the data.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import * as assert from 'uvu/assert';
import { nextLink, type Reply, request } from './helpers.js';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `check` every 25 ms until it holds, giving up after `capMs` (60 s): waits, asserts no duration. */
export async function until(what: string, check: () => boolean | Promise<boolean>, capMs = 60_000): Promise<void> {
  const end = Date.now() + capMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await sleep(25);
  }
}

export interface Change {
  seq: number;
  kind: string;
  id: unknown;
  op: string;
  at: string;
  element?: Record<string, unknown>;
}

export const keyOf = (kind: string, id: unknown) => `${kind}/${id}`;
/** A change without what varies between reads (`element` is the element as it is now). */
export const brief = (change: Pick<Change, 'seq' | 'kind' | 'id' | 'op'>) => `${change.seq} ${change.op} ${keyOf(change.kind, change.id)}`;
/** All of a change that every read of it must give alike. */
export const recorded = (change: Change) => `${brief(change)} at ${change.at}`;

/** Every change after `since` through one process, page after page; `query` adds parameters (`&kinds=…`). */
export async function readFeed(base: string, since = 0, query = ''): Promise<Change[]> {
  const changes: Change[] = [];
  for (let at: string | undefined = `/_changes?since=${since}&limit=1000${query}`; at; ) {
    const reply = await request(base, 'GET', at);
    if (reply.status !== 200) throw new Error(`GET ${at}: ${reply.status} ${reply.text}`);
    changes.push(...(reply.body as Change[]));
    at = nextLink(reply);
  }
  return changes;
}

/** Every element of a collection through one process, by its `id`. */
export async function readAll(base: string, path: string): Promise<Map<number, Record<string, unknown>>> {
  const rows = new Map<number, Record<string, unknown>>();
  for (let at: string | undefined = `${path}?limit=1000`; at; ) {
    const reply = await request(base, 'GET', at);
    if (reply.status !== 200) throw new Error(`GET ${at}: ${reply.status} ${reply.text}`);
    for (const row of reply.body as Record<string, unknown>[]) rows.set(row.id as number, row);
    at = nextLink(reply);
  }
  return rows;
}

/** What `seqs` breaks of "1, 2, 3 … with nothing missing or twice" (the first few breaks), empty when nothing. */
export function contiguityBreaks(seqs: number[], first = 1): string[] {
  const breaks: string[] = [];
  seqs.forEach((seq, i) => {
    if (seq !== first + i && breaks.length < 10) breaks.push(`position ${i}: seq ${seq}, expected ${first + i} (previous ${seqs[i - 1]})`);
  });
  return breaks;
}

// --- readers that walk the feed during the load ----------------------------------------------------

export interface Reader {
  /** Every change read, in the order read. */
  changes: Change[];
  /** What a page broke (not a 200, out of order, not after since, a Link that names another since). */
  problems: string[];
  pages: number;
  /** Stops walking, then reads on until it has read `newest`. */
  finish: (newest: number) => Promise<void>;
}

/**
 * Walks the feed through `base` with `?since=<last seq seen>` over and over until finished: the way
 * a client follows it. Each page is checked as it comes; the whole walk is left to the test.
 */
export function startReader(base: string, options: { limit: number; kinds?: string; since?: number }): Reader {
  const reader: Reader = { changes: [], problems: [], pages: 0, finish: async () => {} };
  let last = options.since ?? 0;
  let running = true;
  const query = `&limit=${options.limit}${options.kinds ? `&kinds=${options.kinds}` : ''}`;
  const page = async (): Promise<number> => {
    const path = `/_changes?since=${last}${query}`;
    let reply: Reply;
    try {
      reply = await request(base, 'GET', path);
    } catch (error) {
      reader.problems.push(`GET ${path}: ${(error as Error).message}`);
      return 0;
    }
    reader.pages++;
    if (reply.status !== 200) {
      reader.problems.push(`GET ${path}: ${reply.status} ${reply.text.slice(0, 300)}`);
      return 0;
    }
    const changes = reply.body as Change[];
    let previous = last;
    for (const change of changes) {
      if (!(change.seq > previous)) reader.problems.push(`GET ${path}: seq ${change.seq} after ${previous}`);
      if (change.element !== undefined && change.element.id !== change.id)
        reader.problems.push(`GET ${path}: change ${brief(change)} carries element ${change.element.id}`);
      previous = change.seq;
    }
    const link = nextLink(reply);
    if (link !== undefined && (changes.length !== options.limit || link !== `/_changes?since=${previous}${query}`))
      reader.problems.push(`GET ${path}: ${changes.length} changes and Link ${link}`);
    reader.changes.push(...changes);
    last = previous;
    return changes.length;
  };
  const walking = (async () => {
    while (running && reader.problems.length < 20) {
      // An empty page waits a little; otherwise the next page is asked for at once (a reader keeping up).
      if ((await page()) === 0) await sleep(5 + Math.random() * 20);
    }
  })();
  reader.finish = async (newest: number) => {
    running = false;
    await walking;
    await until(`a reader of ${base} to reach seq ${newest} (at ${last})`, async () => {
      while ((await page()) > 0);
      return last >= newest || reader.problems.length >= 20;
    });
  };
  return reader;
}

// --- writers and their ledger ------------------------------------------------------------------------

export type Op = 'create' | 'update' | 'delete';

/** One change a write must record: of a known element (`key`), or of one it creates, known by its unique name until answered. */
export interface Effect {
  kind: string;
  op: Op;
  key?: string;
  name?: string;
}

export interface Ledger {
  /** By element (`kind/id`), the changes its acknowledged writes made, in the order they were acknowledged. */
  acked: Map<string, Op[]>;
  /** Writes that got no answer (a connection that failed): each may or may not have committed. */
  unknown: { what: string; effects: Effect[] }[];
  /** Answers no write of the plan expects (anything but its success, or its planned refusal). */
  unexpected: string[];
  /** Writes answered 2xx, and answered with their planned refusal (which must record nothing). */
  acknowledged: number;
  refused: number;
  /** How many changes the acknowledged writes made. */
  changes: number;
}

interface Planned {
  what: string;
  method: string;
  path: string;
  body?: unknown;
  /** The status the write is planned to get: its success, or a refusal (409, 404…) that rolls back. */
  expect: number;
  /** Another answer that is a refusal too (a batch past BATCH_TIMEOUT_MS). */
  alsoRefused?: (reply: Reply) => boolean;
  /** What it records, creates by name (for a write whose answer never came). */
  effects: Effect[];
  /** On the expected answer (when a success): checks it, updates the writer's state, gives the effects with keys. */
  settle?: (reply: Reply) => Effect[];
}

interface UserState {
  email: string;
  pets: Set<number>;
  orders: Set<number>;
}
interface PetState {
  owner: number | null;
  orders: Set<number>;
}

const pick = <T>(values: Iterable<T>): T | undefined => {
  const all = [...values];
  return all[Math.floor(Math.random() * all.length)];
};
const between = (low: number, high: number) => low + Math.floor(Math.random() * (high - low + 1));
const SPECIES = ['cat', 'dog', 'bird', 'fish', 'other'];

/**
 * One writer: its own users, pets and orders, which only it writes, one write after another (so an
 * element's writes are acknowledged in the order they were made). It plans each write from what it
 * knows, and knows what each must record: a user's delete also nulls the owner of its pets.
 */
class Writer {
  users = new Map<number, UserState>();
  pets = new Map<number, PetState>();
  orders = new Map<number, { user: number; pet: number }>();
  private made = 0;

  constructor(
    readonly label: string,
    readonly options: { bulkMax: number; batchMax: number },
  ) {}

  private fresh(): string {
    return `${this.label}-${++this.made}`;
  }

  private addUser(id: number, email: string) {
    this.users.set(id, { email, pets: new Set(), orders: new Set() });
  }

  private addPet(id: number, owner: number | null) {
    this.pets.set(id, { owner, orders: new Set() });
    if (owner !== null) this.users.get(owner)?.pets.add(id);
  }

  private setOwner(pet: number, owner: number | null) {
    const state = this.pets.get(pet) as PetState;
    if (state.owner !== null) this.users.get(state.owner)?.pets.delete(pet);
    state.owner = owner;
    if (owner !== null) this.users.get(owner)?.pets.add(pet);
  }

  private created(reply: Reply, kind: string, names: (string | undefined)[], add: (id: number, i: number) => void): Effect[] {
    const bodies = (Array.isArray(reply.body) ? reply.body : [reply.body]) as Record<string, unknown>[];
    if (bodies.length !== names.length) throw new Error(`${kind}: ${bodies.length} created, ${names.length} sent`);
    return bodies.map((body, i) => {
      if (names[i] !== undefined && body.name !== names[i]) throw new Error(`${kind}: created ${body.name}, sent ${names[i]} at ${i}`);
      add(body.id as number, i);
      return { kind, op: 'create', key: keyOf(kind, body.id) };
    });
  }

  createUser(): Planned {
    const name = this.fresh();
    const email = `${name}@feed.test`;
    return {
      what: `POST /users ${name}`,
      method: 'POST',
      path: '/users',
      body: { name, email },
      expect: 201,
      effects: [{ kind: 'users', op: 'create', name }],
      settle: (reply) => this.created(reply, 'users', [name], (id) => this.addUser(id, email)),
    };
  }

  bulkUsers(size = between(2, this.options.bulkMax)): Planned {
    const users = Array.from({ length: size }, () => {
      const name = this.fresh();
      return { name, email: `${name}@feed.test` };
    });
    return {
      what: `POST /users [${size}] from ${users[0]?.name}`,
      method: 'POST',
      path: '/users',
      body: users,
      expect: 201,
      effects: users.map(({ name }) => ({ kind: 'users', op: 'create', name })),
      settle: (reply) =>
        this.created(
          reply,
          'users',
          users.map((u) => u.name),
          (id, i) => this.addUser(id, (users[i] as { email: string }).email),
        ),
    };
  }

  /** A bulk create whose last element takes the email of an existing user: a 409 that rolls the whole array back. */
  failingBulk(): Planned | undefined {
    const taken = pick(this.users.values());
    if (!taken) return undefined;
    const users = Array.from({ length: between(1, this.options.bulkMax) }, () => {
      const name = this.fresh();
      return { name, email: `${name}@feed.test` };
    });
    users.push({ name: this.fresh(), email: taken.email });
    return {
      what: `POST /users [${users.length}] ending in a taken email`,
      method: 'POST',
      path: '/users',
      body: users,
      expect: 409,
      effects: [],
    };
  }

  createPet(): Planned {
    const name = this.fresh();
    const owner = Math.random() < 0.8 ? (pick(this.users.keys()) ?? null) : null;
    const species = pick(SPECIES);
    // Half of them through the related path.
    const related = owner !== null && Math.random() < 0.5;
    return {
      what: `POST pet ${name}`,
      method: 'POST',
      path: related ? `/users/${owner}/pets` : '/pets',
      body: related ? { name, species } : { name, species, ownerId: owner },
      expect: 201,
      effects: [{ kind: 'pets', op: 'create', name }],
      settle: (reply) => this.created(reply, 'pets', [name], (id) => this.addPet(id, owner)),
    };
  }

  bulkPets(size = between(2, this.options.bulkMax)): Planned {
    const pets = Array.from({ length: size }, () => ({
      name: this.fresh(),
      species: pick(SPECIES),
      ownerId: Math.random() < 0.7 ? (pick(this.users.keys()) ?? null) : null,
    }));
    return {
      what: `POST /pets [${size}] from ${pets[0]?.name}`,
      method: 'POST',
      path: '/pets',
      body: pets,
      expect: 201,
      effects: pets.map(({ name }) => ({ kind: 'pets', op: 'create', name })),
      settle: (reply) =>
        this.created(
          reply,
          'pets',
          pets.map((p) => p.name),
          (id, i) => this.addPet(id, (pets[i] as { ownerId: number | null }).ownerId),
        ),
    };
  }

  patchUser(): Planned | undefined {
    const user = pick(this.users.keys());
    if (user === undefined) return undefined;
    return {
      what: `PATCH /users/${user}`,
      method: 'PATCH',
      path: `/users/${user}`,
      body: { name: this.fresh() },
      expect: 200,
      effects: [{ kind: 'users', op: 'update', key: keyOf('users', user) }],
      settle: () => [{ kind: 'users', op: 'update', key: keyOf('users', user) }],
    };
  }

  /** A PATCH whose If-Match names no version: a 412, nothing written. */
  failingPatch(): Planned | undefined {
    const user = pick(this.users.keys());
    if (user === undefined) return undefined;
    return {
      what: `PATCH /users/${user} If-Match: stale`,
      method: 'PATCH',
      path: `/users/${user}`,
      body: { name: this.fresh() },
      expect: 412,
      effects: [],
    };
  }

  patchPet(): Planned | undefined {
    const pet = pick(this.pets.keys());
    if (pet === undefined) return undefined;
    // A new name, or a new owner (another of this writer's users, or none).
    const owner = Math.random() < 0.5 ? (pick(this.users.keys()) ?? null) : undefined;
    const effect: Effect = { kind: 'pets', op: 'update', key: keyOf('pets', pet) };
    return {
      what: `PATCH /pets/${pet}`,
      method: 'PATCH',
      path: `/pets/${pet}`,
      body: owner === undefined ? { name: this.fresh() } : { ownerId: owner },
      expect: 200,
      effects: [effect],
      settle: () => {
        if (owner !== undefined) this.setOwner(pet, owner);
        return [effect];
      },
    };
  }

  deletePet(): Planned | undefined {
    const pet = pick(this.pets.keys());
    if (pet === undefined) return undefined;
    const state = this.pets.get(pet) as PetState;
    // A pet with orders is restricted: a 409, nothing recorded.
    if (state.orders.size > 0)
      return { what: `DELETE /pets/${pet} (has orders)`, method: 'DELETE', path: `/pets/${pet}`, expect: 409, effects: [] };
    const effect: Effect = { kind: 'pets', op: 'delete', key: keyOf('pets', pet) };
    return {
      what: `DELETE /pets/${pet}`,
      method: 'DELETE',
      path: `/pets/${pet}`,
      expect: 204,
      effects: [effect],
      settle: () => {
        this.setOwner(pet, null);
        this.pets.delete(pet);
        return [effect];
      },
    };
  }

  deleteUser(): Planned | undefined {
    const user = pick(this.users.keys());
    if (user === undefined) return undefined;
    const state = this.users.get(user) as UserState;
    if (state.orders.size > 0)
      return { what: `DELETE /users/${user} (has orders)`, method: 'DELETE', path: `/users/${user}`, expect: 409, effects: [] };
    // The foreign key nulls the owner of each of its pets: an update of each, in the same transaction.
    const effects: Effect[] = [
      { kind: 'users', op: 'delete', key: keyOf('users', user) },
      ...[...state.pets].map((pet): Effect => ({ kind: 'pets', op: 'update', key: keyOf('pets', pet) })),
    ];
    return {
      what: `DELETE /users/${user} (${state.pets.size} pets)`,
      method: 'DELETE',
      path: `/users/${user}`,
      expect: 204,
      effects,
      settle: () => {
        for (const pet of state.pets) (this.pets.get(pet) as PetState).owner = null;
        this.users.delete(user);
        return effects;
      },
    };
  }

  createOrder(): Planned | undefined {
    const user = pick(this.users.keys());
    const pet = pick(this.pets.keys());
    if (user === undefined || pet === undefined) return undefined;
    const related = Math.random() < 0.5;
    return {
      what: `POST order of ${user} for ${pet}`,
      method: 'POST',
      path: related ? `/users/${user}/orders` : '/orders',
      body: related ? { petId: pet } : { userId: user, petId: pet },
      expect: 201,
      effects: [{ kind: 'orders', op: 'create' }],
      settle: (reply) =>
        this.created(reply, 'orders', [undefined], (id) => {
          this.orders.set(id, { user, pet });
          this.users.get(user)?.orders.add(id);
          this.pets.get(pet)?.orders.add(id);
        }),
    };
  }

  patchOrder(): Planned | undefined {
    const order = pick(this.orders.keys());
    if (order === undefined) return undefined;
    const effect: Effect = { kind: 'orders', op: 'update', key: keyOf('orders', order) };
    return {
      what: `PATCH /orders/${order}`,
      method: 'PATCH',
      path: `/orders/${order}`,
      body: { status: pick(['approved', 'delivered']), quantity: between(1, 9) },
      expect: 200,
      effects: [effect],
      settle: () => [effect],
    };
  }

  deleteOrder(): Planned | undefined {
    const order = pick(this.orders.keys());
    if (order === undefined) return undefined;
    const { user, pet } = this.orders.get(order) as { user: number; pet: number };
    const effect: Effect = { kind: 'orders', op: 'delete', key: keyOf('orders', order) };
    return {
      what: `DELETE /orders/${order}`,
      method: 'DELETE',
      path: `/orders/${order}`,
      expect: 204,
      effects: [effect],
      settle: () => {
        this.orders.delete(order);
        this.users.get(user)?.orders.delete(order);
        this.pets.get(pet)?.orders.delete(order);
        return [effect];
      },
    };
  }

  /**
   * A /_batch of `size` operations (at least 4): users created with labels, a pet under each through
   * `{label}` in the path, a PATCH of each new user, PATCHes of existing users, deletes of existing
   * pets without orders. `failing` ends it with a DELETE of a user that does not exist: a 404 that
   * rolls back everything before it.
   */
  batch(size = between(4, this.options.batchMax), failing = false): Planned {
    const operations: Record<string, unknown>[] = [];
    /** Per operation: what it records (a create known by name), and how to read its key from the result. */
    const plan: { effect: Effect; created?: { kind: string; owner?: number; email?: string } }[] = [];
    const touched = new Set<number>();
    const deleted = new Set<number>();
    let made = 0;
    const room = size - (failing ? 1 : 0);
    while (operations.length < room) {
      const roll = Math.random();
      const oldUser = pick([...this.users.keys()].filter((id) => !touched.has(id)));
      const oldPet = pick([...this.pets].filter(([id, pet]) => pet.orders.size === 0 && !deleted.has(id)).map(([id]) => id));
      if (roll < 0.15 && oldUser !== undefined) {
        touched.add(oldUser);
        operations.push({ method: 'PATCH', path: `/users/${oldUser}`, body: { name: this.fresh() } });
        plan.push({ effect: { kind: 'users', op: 'update', key: keyOf('users', oldUser) } });
      } else if (roll < 0.25 && oldPet !== undefined) {
        deleted.add(oldPet);
        operations.push({ method: 'DELETE', path: `/pets/${oldPet}` });
        plan.push({ effect: { kind: 'pets', op: 'delete', key: keyOf('pets', oldPet) } });
      } else {
        const label = `u${made++}`;
        const name = this.fresh();
        const create = plan.length;
        operations.push({ method: 'POST', path: '/users', body: { name, email: `${name}@feed.test` }, label });
        plan.push({ effect: { kind: 'users', op: 'create', name }, created: { kind: 'users', email: `${name}@feed.test` } });
        if (operations.length < room) {
          const pet = this.fresh();
          operations.push({ method: 'POST', path: `/users/{${label}}/pets`, body: { name: pet, species: pick(SPECIES) } });
          plan.push({ effect: { kind: 'pets', op: 'create', name: pet }, created: { kind: 'pets', owner: create } });
        }
        if (operations.length < room) {
          // A new email, not a new name: the name tells an unanswered batch's users in the data.
          const email = `${name}.b@feed.test`;
          operations.push({ method: 'PATCH', path: `/users/{${label}}`, body: { email } });
          plan.push({ effect: { kind: 'users', op: 'update', name } });
          (plan[create] as (typeof plan)[number]).created = { kind: 'users', email };
        }
      }
    }
    if (failing) operations.push({ method: 'DELETE', path: '/users/0' });
    const what = `POST /_batch of ${operations.length}${failing ? ' ending in a 404' : ''}`;
    if (failing) {
      return {
        what,
        method: 'POST',
        path: '/_batch',
        body: { operations },
        expect: 404,
        alsoRefused: (reply) => reply.status === 422 && /BATCH_TIMEOUT_MS|took longer|time/i.test(reply.text),
        effects: [],
      };
    }
    return {
      what,
      method: 'POST',
      path: '/_batch',
      body: { operations },
      expect: 200,
      alsoRefused: (reply) => reply.status === 422 && /BATCH_TIMEOUT_MS|took longer|time/i.test(reply.text),
      effects: plan.map((step) => step.effect),
      settle: (reply) => {
        const results = reply.body.results as { status: number; body: Record<string, unknown> }[];
        if (results.length !== operations.length) throw new Error(`${what}: ${results.length} results`);
        const ids = new Map<string, number>();
        return plan.map((step, i) => {
          const result = results[i] as { status: number; body: Record<string, unknown> };
          const { effect } = step;
          if (step.created) {
            if (result.status !== 201 || result.body.name !== effect.name)
              throw new Error(`${what}: result ${i} ${JSON.stringify(result)}`);
            const id = result.body.id as number;
            ids.set(effect.name as string, id);
            if (step.created.kind === 'users') this.addUser(id, step.created.email as string);
            else {
              const owner = ids.get(plan[step.created.owner as number]?.effect.name as string) as number;
              this.addPet(id, owner);
            }
            return { kind: effect.kind, op: effect.op, key: keyOf(effect.kind, id) };
          }
          if (result.status !== (effect.op === 'delete' ? 204 : 200)) throw new Error(`${what}: result ${i} ${JSON.stringify(result)}`);
          if (effect.key) {
            if (effect.op === 'delete') {
              const pet = Number(effect.key.split('/')[1]);
              this.setOwner(pet, null);
              this.pets.delete(pet);
            }
            return effect;
          }
          return { kind: effect.kind, op: effect.op, key: keyOf(effect.kind, ids.get(effect.name as string)) };
        });
      },
    };
  }
}

export interface WriteLoadOptions {
  /** The processes or instances to write through: each writer's n-th write goes to targets[(writer + n) % length]. */
  targets: string[];
  label: string;
  writers: number;
  /** Writes per writer (a bulk array or a batch is one write). */
  writes: number;
  /** Largest bulk array and batch. */
  bulkMax: number;
  batchMax: number;
  /** Writers that send only big bulk arrays and batches (long transactions beside short ones), and how big. */
  heavy?: number;
  heavyBulk?: number;
  heavyBatch?: number;
  /** Writes per heavy writer (`writes` by default). */
  heavyWrites?: number;
  /** Orders too (only when every create can be told by its answer: not across a kill). */
  orders?: boolean;
  /** Deliberate refusals (409, 412, 404 batches) among the writes. */
  refusals?: boolean;
  /** A connection that fails ends that writer (its write is unknown) instead of counting as unexpected. */
  expectNetworkErrors?: boolean;
  /** Stops every writer before its next write once true. */
  stop?: () => boolean;
}

/** Starts the writers; `done` settles with the ledger once each has made its writes (or stopped). */
export function startWriteLoad(options: WriteLoadOptions): { ledger: Ledger; done: Promise<Ledger> } {
  const ledger: Ledger = { acked: new Map(), unknown: [], unexpected: [], acknowledged: 0, refused: 0, changes: 0 };
  const record = (effect: Effect) => {
    const key = effect.key as string;
    const ops = ledger.acked.get(key) ?? [];
    ops.push(effect.op);
    ledger.acked.set(key, ops);
    ledger.changes++;
  };
  const run = async (index: number) => {
    const heavy = index < (options.heavy ?? 0);
    const writer = new Writer(`${options.label}-w${index}`, {
      bulkMax: options.bulkMax,
      batchMax: options.batchMax,
    });
    const plans: [number, () => Planned | undefined][] = heavy
      ? [
          [3, () => writer.bulkUsers(options.heavyBulk ?? options.bulkMax)],
          [2, () => writer.bulkPets(options.heavyBulk ?? options.bulkMax)],
          [3, () => writer.batch(options.heavyBatch ?? options.batchMax)],
          [1, () => (options.refusals ? writer.batch(options.heavyBatch ?? options.batchMax, true) : undefined)],
        ]
      : [
          [10, () => writer.createUser()],
          [6, () => writer.createPet()],
          [3, () => writer.bulkUsers()],
          [2, () => writer.bulkPets()],
          [8, () => writer.patchUser()],
          [6, () => writer.patchPet()],
          [3, () => writer.deletePet()],
          [3, () => writer.deleteUser()],
          [3, () => (options.orders === false ? undefined : writer.createOrder())],
          [2, () => (options.orders === false ? undefined : writer.patchOrder())],
          [2, () => (options.orders === false ? undefined : writer.deleteOrder())],
          [2, () => writer.batch()],
          [1, () => (options.refusals ? writer.failingBulk() : undefined)],
          [1, () => (options.refusals ? writer.failingPatch() : undefined)],
          [1, () => (options.refusals ? writer.batch(undefined, true) : undefined)],
        ];
    const total = plans.reduce((sum, [weight]) => sum + weight, 0);
    const choose = (): Planned => {
      let roll = Math.random() * total;
      for (const [weight, plan] of plans) {
        roll -= weight;
        if (roll < 0) return plan() ?? writer.createUser();
      }
      return writer.createUser();
    };
    const writes = heavy ? (options.heavyWrites ?? options.writes) : options.writes;
    for (let n = 0; n < writes && !options.stop?.(); n++) {
      const planned = choose();
      const base = options.targets[(index + n) % options.targets.length] as string;
      const headers: Record<string, string> = planned.expect === 412 ? { 'if-match': '"stale"' } : {};
      let reply: Reply;
      try {
        reply = await request(base, planned.method, planned.path, { body: planned.body, headers });
      } catch (error) {
        ledger.unknown.push({ what: planned.what, effects: planned.effects });
        if (!options.expectNetworkErrors) ledger.unexpected.push(`${planned.what} via ${base}: ${(error as Error).message}`);
        return;
      }
      if (reply.status === planned.expect && planned.settle) {
        try {
          for (const effect of planned.settle(reply)) record(effect);
          ledger.acknowledged++;
        } catch (error) {
          ledger.unexpected.push(`${planned.what} via ${base}: ${(error as Error).message}`);
          return;
        }
      } else if (reply.status === planned.expect || planned.alsoRefused?.(reply)) {
        ledger.refused++;
      } else {
        // An answer nobody planned: its outcome is not known (and the test fails on it).
        ledger.unexpected.push(`${planned.what} via ${base}: ${reply.status} ${reply.text.slice(0, 300)}`);
        ledger.unknown.push({ what: planned.what, effects: planned.effects });
        return;
      }
    }
  };
  const done = Promise.all(Array.from({ length: options.writers }, (_, i) => run(i))).then(() => ledger);
  return { ledger, done };
}

/**
 * What a feed (walked from its start) breaks of the ledger, empty when nothing: element by element,
 * the feed's ops must be exactly those of the acknowledged writes in the order they were acknowledged,
 * followed by those of its writer's unanswered write when that one committed (all of its changes or
 * none). A change of an element no write made is a change of a write that did not commit. `rows`,
 * the data as it is now by kind, tells which unanswered creates committed (by their unique names).
 */
export function compareWithLedger(feed: Change[], ledger: Ledger, rows: Map<string, Map<number, Record<string, unknown>>>): string[] {
  const problems: string[] = [];
  const inFeed = new Map<string, Op[]>();
  for (const change of feed) {
    const key = keyOf(change.kind, change.id);
    inFeed.set(key, [...(inFeed.get(key) ?? []), change.op as Op]);
  }
  const expected = new Map<string, Op[]>([...ledger.acked].map(([key, ops]) => [key, [...ops]]));
  const byName = new Map<string, string>();
  for (const [kind, elements] of rows)
    for (const [id, row] of elements) if (typeof row.name === 'string') byName.set(row.name, keyOf(kind, id));
  for (const { what, effects } of ledger.unknown) {
    const resolved = effects.map((effect) => ({ ...effect, key: effect.key ?? (effect.name && byName.get(effect.name)) }));
    // A write can change one element more than once (a batch creates a user, then patches it): each of
    // its effects on a key is looked for after the acknowledged ones and the write's own earlier ones.
    const earlier = new Map<string, number>();
    const committed = resolved.filter(({ key, op }) => {
      if (!key) return false;
      const before = earlier.get(key) ?? 0;
      earlier.set(key, before + 1);
      return inFeed.get(key)?.[(expected.get(key)?.length ?? 0) + before] === op;
    });
    if (committed.length === 0) continue;
    if (committed.length !== resolved.length) {
      problems.push(`unanswered ${what}: ${committed.length} of its ${resolved.length} changes are in the feed (all or none)`);
      continue;
    }
    for (const { key, op } of resolved) expected.set(key as string, [...(expected.get(key as string) ?? []), op]);
  }
  for (const key of new Set([...expected.keys(), ...inFeed.keys()])) {
    const want = (expected.get(key) ?? []).join(',');
    const got = (inFeed.get(key) ?? []).join(',');
    if (want !== got && problems.length < 30) problems.push(`${key}: acknowledged [${want}], feed [${got}]`);
  }
  return problems;
}

/** The elements (`kind/id`) the feed says exist: created, and not deleted since. */
export function liveInFeed(feed: Change[], kind: string): Set<string> {
  const live = new Set<string>();
  for (const change of feed) {
    if (change.kind !== kind) continue;
    const key = keyOf(kind, change.id);
    if (change.op === 'create') live.add(key);
    if (change.op === 'delete') live.delete(key);
  }
  return live;
}

// --- an event-stream client ------------------------------------------------------------------------

export interface EventStream {
  status: number;
  headers: IncomingMessage['headers'];
  /** Each complete event received, in order (one cut off by a disconnect is not). */
  events: { id: string; event: string; data: Change }[];
  /** The comment lines received (the opening one, heartbeats). */
  comments: string[];
  /** The body of an answer that is no stream (a problem). */
  text: string;
  /** The id of the last complete event: what a client resumes from (Last-Event-ID). */
  lastId: () => string | undefined;
  ended: Promise<void>;
  /** Drops the connection at once, wherever the stream is; nothing received after counts. */
  close: () => void;
}

/** Opens GET `path` as Server-Sent Events on a connection of its own and parses events as they come. */
export function openStream(base: string, path: string, headers: Record<string, string> = {}): Promise<EventStream> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(new URL(path, base), { headers: { accept: 'text/event-stream', ...headers }, agent: false }, (res) => {
      let buffer = '';
      let closed = false;
      const stream: EventStream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        events: [],
        comments: [],
        text: '',
        lastId: () => stream.events.at(-1)?.id,
        ended: new Promise((done) => res.on('close', () => done())),
        close: () => {
          closed = true;
          req.destroy();
        },
      };
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (closed) return;
        if (stream.status !== 200) {
          stream.text += chunk;
          return;
        }
        buffer += chunk;
        for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const fields: Record<string, string> = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) {
              stream.comments.push(line);
              continue;
            }
            const colon = line.indexOf(':');
            fields[line.slice(0, colon)] = line.slice(colon + 1).replace(/^ /, '');
          }
          if (fields.data !== undefined)
            stream.events.push({ id: fields.id as string, event: fields.event as string, data: JSON.parse(fields.data) });
        }
      });
      res.on('error', () => undefined);
      resolve(stream);
    });
    req.on('error', reject);
    req.end();
  });
}

/** Sends one request on a connection of its own (a cluster hands each new connection to the next worker). */
export function requestAlone(base: string, method: string, path: string, body?: unknown): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = payload ? { 'content-type': 'application/json', 'content-length': String(payload.length) } : {};
    const req = httpRequest(new URL(path, base), { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          parsed = undefined;
        }
        const replyHeaders = new Headers();
        for (const [name, value] of Object.entries(res.headers)) if (typeof value === 'string') replyHeaders.set(name, value);
        resolve({ status: res.statusCode as number, headers: replyHeaders, text, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

// --- checks shared by the suites -------------------------------------------------------------------

export type Data = Map<string, Map<number, Record<string, unknown>>>;

/** The last seq of the feed through `base` (0 before any change). */
export const newestOf = async (base: string) => (await readFeed(base)).at(-1)?.seq ?? 0;

/** The data as it is now, by kind, through one process. */
export async function dataOf(base: string): Promise<Data> {
  const rows: Data = new Map();
  for (const kind of ['users', 'pets', 'orders']) rows.set(kind, await readAll(base, `/${kind}`));
  return rows;
}

/** The feed (from its first change) says what the data holds: the elements created and not deleted since are exactly the rows. */
export function assertFeedMatchesData(feed: Change[], rows: Data) {
  for (const [kind, elements] of rows) {
    const live = [...liveInFeed(feed, kind)].sort();
    const stored = [...elements.keys()].map((id) => keyOf(kind, id)).sort();
    assert.equal(
      live.filter((key) => !stored.includes(key)),
      [],
      `${kind} the feed created and never deleted, but no row`,
    );
    assert.equal(
      stored.filter((key) => !live.includes(key)),
      [],
      `${kind} rows the feed never created (or deleted)`,
    );
  }
}

/** Each event as the feed sends it: its id is its seq and its event its op. */
export function assertEventsWellFormed(stream: EventStream) {
  for (const { id, event, data } of stream.events) {
    assert.is(id, String(data.seq));
    assert.is(event, data.op);
  }
}

/**
 * Follows the feed with event streams while writers write: connects `rounds` times through `bases`
 * in turn, each time drops the connection after a few events (mid-event or between events) and lets
 * writes land while none is open, then resumes with Last-Event-ID; at the end `stopWriting` stops the
 * writers and gives the newest seq, which one last stream must reach. Resolves with every event
 * received, connection after connection, in order.
 */
export async function followWithResumes(
  bases: string[],
  start: number,
  rounds: number,
  stopWriting: () => Promise<number>,
): Promise<EventStream['events']> {
  const received: EventStream['events'] = [];
  let last = String(start);
  for (let round = 0; round < rounds; round++) {
    // The first connection starts at `since`; the others resume from the last event received.
    const stream =
      round === 0
        ? await openStream(bases[0] as string, `/_changes?since=${start}`)
        : await openStream(bases[round % bases.length] as string, '/_changes', { 'last-event-id': last });
    assert.is(stream.status, 200, stream.text);
    const wanted = 3 + Math.floor(Math.random() * 40);
    await until(`round ${round}: ${wanted} events`, () => stream.events.length >= wanted);
    stream.close();
    assertEventsWellFormed(stream);
    received.push(...stream.events);
    last = stream.lastId() ?? last;
    const since = Number(last);
    await until('writes while no stream is open', async () => (await readFeed(bases[1 % bases.length] as string, since)).length >= 5);
  }
  const newest = await stopWriting();
  const final = await openStream(bases[rounds % bases.length] as string, '/_changes', { 'last-event-id': last });
  try {
    assert.is(final.status, 200, final.text);
    await until(`the last stream to reach seq ${newest}`, () => Number(final.lastId() ?? last) >= newest);
    assertEventsWellFormed(final);
    received.push(...final.events);
  } finally {
    final.close();
  }
  return received;
}
