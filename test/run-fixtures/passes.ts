// Fixture for run.test.ts (not a suite of its own): a run where everything passes and ends by itself.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';

const test = suite('a passing test');

test('passes', () => {
  assert.ok(true);
});

test.run();
