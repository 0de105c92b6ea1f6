// Fixture for run.test.ts (not a suite of its own): one test passes and one fails with a message.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';

const test = suite('a failing test');

test('passes', () => {
  assert.ok(true);
});

test('fails', () => {
  assert.is(1 + 1, 3, 'one and one make two');
});

test.run();
