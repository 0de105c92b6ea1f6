// Fixture for run.test.ts (not a suite of its own): a test fails before stopping the service it
// spawned, which keeps the test process alive; the runner must still end the run.
import { writeFileSync } from 'node:fs';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnService } from '../support/helpers.js';

const test = suite('a failing test that leaves a service running');

test('spawns a service, then fails before stopping it', async () => {
  const service = await spawnService({ DATABASE_PATH: ':memory:' });
  writeFileSync(process.env.RUN_FIXTURE_PID_FILE as string, String(service.child.pid));
  assert.is(1 + 1, 3);
  await service.stop();
});

test.run();
