// Per-kind sample data of the tests' pet shop (test/pet-shop/schema.ts) for the shared contract
// suite: a valid body (making the parents it needs), a field to change, a required field.
import type { Service } from './helpers.js';

export interface KindFixture {
  name: string;
  /** A valid create body; creates any parent elements it refers to. */
  sample: (service: Service) => Promise<Record<string, unknown>>;
  /** A writable field and another valid value for it. */
  change: { field: string; value: unknown };
  /** A field without default whose absence is a 422. */
  required: string;
}

let counter = 0;
const unique = () => `${Date.now().toString(36)}-${++counter}`;

async function created(service: Service, path: string, body: unknown): Promise<number> {
  const reply = await service.request('POST', path, { body });
  if (reply.status !== 201) throw new Error(`fixture POST ${path} failed: ${reply.status} ${reply.text}`);
  return reply.body.id;
}

export const userSample = () => ({ name: 'Ada', email: `ada-${unique()}@example.com` });
export const petSample = () => ({ name: 'Rex', species: 'dog' });

export const FIXTURES: KindFixture[] = [
  { name: 'users', sample: async () => userSample(), change: { field: 'name', value: 'Grace' }, required: 'email' },
  {
    name: 'pets',
    sample: async (s) => ({ ...petSample(), ownerId: await created(s, '/users', userSample()) }),
    change: { field: 'species', value: 'cat' },
    required: 'name',
  },
  {
    name: 'orders',
    sample: async (s) => ({ userId: await created(s, '/users', userSample()), petId: await created(s, '/pets', petSample()), quantity: 2 }),
    change: { field: 'status', value: 'approved' },
    required: 'petId',
  },
];

export { created };
