// Fixture for run.test.ts (not a suite of its own): one test passes, the next never settles while
// a timer keeps the process alive; the runner's overall bound must end the run.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';

const test = suite('a test that never ends');

test('passes', () => {
  assert.ok(true);
});

test('waits forever', async () => {
  setInterval(() => {}, 1000);
  await new Promise(() => {});
});

test.run();
